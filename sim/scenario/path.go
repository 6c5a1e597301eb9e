package scenario

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A field path names a value in a scenario document: keys joined by dots,
// list items as [i], and keys that are not plain identifiers as ["key"],
// e.g. bootroll.pools[0].maxUnavailable or nodeGroups[0].labels["node-role.kubernetes.io/worker"].

// pathSeg is one step of a field path.
type pathSeg struct {
	key     string
	index   int
	isIndex bool
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// joinKey appends a mapping key to a path.
func joinKey(path, key string) string {
	if !plainKey.MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// joinIndex appends a list index to a path.
func joinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// formatPath is the inverse of parsePath.
func formatPath(segs []pathSeg) string {
	var p string
	for _, s := range segs {
		if s.isIndex {
			p = joinIndex(p, s.index)
		} else {
			p = joinKey(p, s.key)
		}
	}
	return p
}

// parentPath drops the last step of a path.
func parentPath(path string) string {
	segs, err := parsePath(path)
	if err != nil || len(segs) == 0 {
		return ""
	}
	return formatPath(segs[:len(segs)-1])
}

// parsePath splits a field path into its steps.
func parsePath(s string) ([]pathSeg, error) {
	var segs []pathSeg
	i := 0
	for i < len(s) {
		switch {
		case s[i] == '[':
			rest := s[i+1:]
			if strings.HasPrefix(rest, `"`) {
				q, err := strconv.QuotedPrefix(rest)
				if err != nil || !strings.HasPrefix(rest[len(q):], "]") {
					return nil, fmt.Errorf("bad quoted key at offset %d", i)
				}
				key, _ := strconv.Unquote(q)
				segs = append(segs, pathSeg{key: key})
				i += 1 + len(q) + 1
				continue
			}
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, fmt.Errorf("missing ] at offset %d", i)
			}
			n, err := strconv.Atoi(rest[:end])
			if err != nil || n < 0 || strconv.Itoa(n) != rest[:end] {
				return nil, fmt.Errorf("bad list index %q", rest[:end])
			}
			segs = append(segs, pathSeg{index: n, isIndex: true})
			i += 1 + end + 1
		case s[i] == '.':
			if len(segs) == 0 || i+1 >= len(s) || s[i+1] == '.' || s[i+1] == '[' {
				return nil, fmt.Errorf("misplaced . at offset %d", i)
			}
			i++
		default:
			if len(segs) > 0 && s[i-1] != '.' {
				return nil, fmt.Errorf("missing . before offset %d", i)
			}
			j := i
			for j < len(s) && s[j] != '.' && s[j] != '[' {
				j++
			}
			key := s[i:j]
			if !plainKey.MatchString(key) {
				return nil, fmt.Errorf("bad key %q (quote it as [%q])", key, key)
			}
			segs = append(segs, pathSeg{key: key})
			i = j
		}
	}
	if len(segs) == 0 {
		return nil, fmt.Errorf("empty path")
	}
	return segs, nil
}
