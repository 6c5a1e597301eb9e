package apiserver

import "testing"

func TestSubVerbIsVerbSlashSubresource(t *testing.T) {
	for _, verb := range []string{VerbCreate, VerbUpdate, VerbPatch, VerbGet} {
		for _, sub := range []string{"status", "eviction", "scale"} {
			if got, want := subVerb(verb, sub), verb+"/"+sub; got != want {
				t.Errorf("subVerb(%q, %q) = %q, want %q", verb, sub, got, want)
			}
		}
	}
}
