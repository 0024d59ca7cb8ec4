package sqlstore

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestUnmarshalStrings(t *testing.T) {
	for _, in := range []string{
		`[]`, `["a"]`, `["a","b"]`, `["","",""]`, `["naïve 日本語 🚀","<b>&"]`,
		`["a\"b"]`, `["a\\b"]`, `["\u00e9"]`, `[ "a" ]`, `["a",]`, `[,"a"]`, `["a""b"]`, `["a"`, `null`,
		"[\"a\xffb\"]", "[\"tab\there\"]", `["a",1]`, `[1]`, `["a"],`, `"a"`, `[`, `["]`, `[""]`, `["a" ,"b"]`,
	} {
		var want, got []string
		wantErr := json.Unmarshal([]byte(in), &want)
		gotErr := unmarshalStrings(in, &got)
		if (wantErr != nil) != (gotErr != nil) || !reflect.DeepEqual(got, want) || (got == nil) != (want == nil) {
			t.Errorf("%s: got %#v, %v; want %#v, %v", in, got, gotErr, want, wantErr)
		}
	}
}

func FuzzUnmarshalStrings(f *testing.F) {
	for _, s := range []string{`[]`, `["a","b"]`, `["a\"b"]`, "[\"\xff\"]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want, got []string
		wantErr := json.Unmarshal(in, &want)
		gotErr := unmarshalStrings(string(in), &got)
		if (wantErr != nil) != (gotErr != nil) || wantErr == nil && (!reflect.DeepEqual(got, want) || (got == nil) != (want == nil)) {
			t.Errorf("%q: got %#v, %v; want %#v, %v", in, got, gotErr, want, wantErr)
		}
	})
}
