package lifecycle

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/idemkey"
)

// FuzzSubmitRequest decodes and validates arbitrary submit bodies, as the
// handler does, and fingerprints them: nothing may panic, every failure
// must be a validation error, and the fingerprint must not depend on
// member order or whitespace.
func FuzzSubmitRequest(f *testing.F) {
	seeds := []string{
		`{"summary":"done"}`,
		`{"summary":"done","mode":"artifact","checks":[{"name":"unit","status":"passed"}]}`,
		`{"summary":"x","pullRequest":{"title":"t","body":"b","draft":true,"head":"a/b","base":"main","reviewers":["octocat"]},"notes":"n"}`,
		`{"summary":7}`,
		`{"summary":"x","checks":[{"name":"","status":"bad"}],"pullRequest":{"reviewers":[1]}}`,
		`[]`, `null`, `{"summary":"\u0000\ud800"}`, `{"a":{"b":[1,2,{"c":null}]}}`, `{"summary":"x"} trailing`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var p SubmitParams
		err := httpapi.DecodeStrict(raw, &p, &scanLimits)
		if err == nil {
			err = p.validate()
		}
		if err != nil && !errors.Is(err, ErrValidation) {
			t.Fatalf("decoding %q failed with a non-validation error: %v", raw, err)
		}
		var ve *ValidationError
		if errors.As(err, &ve) && len(ve.Fields) == 0 {
			t.Fatalf("validation error without fields for %q", raw)
		}
		canonical, cerr := idemkey.Canonical(raw)
		if cerr != nil {
			return
		}
		again, err := idemkey.Canonical(canonical)
		if err != nil || !bytes.Equal(again, canonical) {
			t.Fatalf("canonical JSON is not stable: %q -> %q -> %q (%v)", raw, canonical, again, err)
		}
	})
}
