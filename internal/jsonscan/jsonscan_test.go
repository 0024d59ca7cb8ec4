package jsonscan

import (
	"fmt"
	"strings"
	"testing"
)

func TestScan(t *testing.T) {
	t.Parallel()
	limits := &Limits{MaxDepth: 4, MaxArray: 5, Arrays: map[string]int{"tags": 2, "a.b[]": 2}, MinArray: 2}
	tests := []struct {
		name string
		raw  string
		want []string // "path: reason"
		hard bool
	}{
		{"empty", ``, nil, false},
		{"plain", `{"a":"x","n":[1,2,3]}`, nil, false},
		{"named array at its limit", `{"tags":["a","b"]}`, nil, false},
		{"named array over", `{"tags":["a","b","c"]}`, []string{"tags: at most 2 entries"}, true},
		{"other array over", `{"n":[1,2,3,4,5,6]}`, []string{"n: at most 5 entries"}, true},
		{"nested named array", `{"a":{"b":[[1,2,3]]}}`, []string{"a.b[0]: at most 2 entries"}, true},
		{"too deep", `{"a":{"b":{"c":{"d":[]}}}}`, []string{"body: nests objects and arrays more than 4 levels deep"}, true},
		{"control character", `{"a":"x\u0007"}`, []string{"a: must not hold control characters other than tab and newline"}, false},
		{"tab and newline pass", `{"a":"x\t\n"}`, nil, false},
		{"raw invalid UTF-8", "{\"a\":\"\xff\"}", []string{"a: must be valid UTF-8"}, false},
		{"unpaired surrogate", `{"a":["ok","\ud800"]}`, []string{"a[1]: must be valid UTF-8"}, false},
		{"paired surrogates pass", `{"a":"\ud83d\ude00"}`, nil, false},
		{"one report per string", `{"a":"\u0001\u0002"}`, []string{"a: must not hold control characters other than tab and newline"}, false},
		{"every string reported", `{"a":"\u0001","b":"\u0002"}`, []string{
			"a: must not hold control characters other than tab and newline",
			"b: must not hold control characters other than tab and newline"}, false},
		{"DEL", "{\"a\":\"\x7f\"}", []string{"a: must not hold control characters other than tab and newline"}, false},
		{"malformed stops quietly", `{"a":"\u0001"`, []string{"a: must not hold control characters other than tab and newline"}, false},
		{"keys are not checked", `{"\u0001":1}`, nil, false},
	}
	for _, tt := range tests {
		var got []string
		hard := Scan([]byte(tt.raw), limits, func(path, reason string) { got = append(got, fmt.Sprintf("%s: %s", path, reason)) })
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || hard != tt.hard {
			t.Errorf("%s: Scan(%q) = %q, hard %v; want %q, hard %v", tt.name, tt.raw, got, hard, tt.want, tt.hard)
		}
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	limits := &Limits{MaxDepth: 4, MaxArray: 3, MinArray: 3}
	type body struct {
		Name  string   `json:"name"`
		Count int      `json:"count"`
		Tags  []string `json:"tags"`
	}
	const control = "must not hold control characters other than tab and newline"
	tests := []struct {
		name     string
		raw      string
		want     []string
		typeOnly bool
	}{
		{"valid", `{"name":"a","count":1}`, nil, true},
		{"text problem: the rest decoded", `{"name":"a\u0001","count":1}`, []string{"name: " + control}, true},
		{"wrong type", `{"name":1}`, []string{"name: must be a string"}, true},
		{"text and type problems together", `{"name":"\u0001","count":"x"}`, []string{"name: " + control, "count: must be a number"}, true},
		{"one problem a member", `{"tags":"\u0001"}`, []string{"tags: " + control}, true},
		{"unknown member alone", `{"name":"\u0001","extra":1}`, []string{"extra: is not a known member"}, false},
		{"malformed", `{"name":`, []string{"body: is not valid JSON"}, false},
		{"not an object", `[1]`, []string{"body: must be a JSON object"}, false},
		{"trailing data", `{} {}`, []string{"body: must hold exactly one JSON object"}, false},
		{"array over its limit: not decoded", `{"tags":["a","b","c","d"]}`, []string{"tags: at most 3 entries"}, false},
	}
	for _, tt := range tests {
		var got []string
		var dst body
		typeOnly := Decode([]byte(tt.raw), &dst, limits, func(path, reason string) { got = append(got, path+": "+reason) })
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || (len(got) > 0 && typeOnly != tt.typeOnly) {
			t.Errorf("%s: Decode(%s) = %q, typeOnly %v; want %q, %v", tt.name, tt.raw, got, typeOnly, tt.want, tt.typeOnly)
		}
	}
}
