package bootc

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestReadBootID(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		path    string
		want    string
		wantErr string
	}{
		{"trimmed", write("id", "8b4c6f0e-2d1a-4f7e-9c3b-5a6d7e8f9a0b\n"), "8b4c6f0e-2d1a-4f7e-9c3b-5a6d7e8f9a0b", ""},
		{"surrounding blanks", write("blanks", "  \tabc\n\n"), "abc", ""},
		{"empty", write("empty", "\n"), "", "the file is empty"},
		{"missing", filepath.Join(dir, "missing"), "", "reading boot ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadBootID(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ReadBootID = %q, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ReadBootID = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := ReadBootID(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: error %v does not wrap fs.ErrNotExist", err)
	}
}

func TestReadBootIDDefault(t *testing.T) {
	if _, err := os.Stat(DefaultBootIDPath); err != nil {
		t.Skipf("no %s here: %v", DefaultBootIDPath, err)
	}
	got, err := ReadBootID("")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(got) {
		t.Errorf("ReadBootID(\"\") = %q, want a UUID", got)
	}
}
