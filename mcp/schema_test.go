package mcp

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestEnumsAreTheAPIs: the values the tools' schemas list for statuses,
// actions and event types are docs/openapi.yaml's, in its order.
func TestEnumsAreTheAPIs(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, values := range map[string][]any{"Status": statusValues, "Action": actionValues, "EventType": eventValues} {
		// A component schema: "    Name:" at the components' depth, then
		// its enum line before the next component.
		re := regexp.MustCompile(`(?m)^    ` + name + `:\n(?:      .*\n)*?      enum: \[(.*)\]`)
		m := re.FindSubmatch(doc)
		if m == nil {
			t.Errorf("docs/openapi.yaml has no enum for %s", name)
			continue
		}
		want := strings.Split(string(m[1]), ", ")
		if got := strings.Fields(strings.Trim(fmt.Sprint(values), "[]")); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: the schemas list %v, docs/openapi.yaml %v", name, got, want)
		}
	}
}
