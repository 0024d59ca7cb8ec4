package lifecycle_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// TestMountingMistakesSayWhatToFix checks the answers to the usual mounting
// mistakes: a prefix that was not stripped, and one stripped with its
// trailing slash (which would otherwise redirect outside the mount).
func TestMountingMistakesSayWhatToFix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name  string
		mount func(h http.Handler) http.Handler
		path  string
		want  string
	}{
		{"prefix not stripped", func(h http.Handler) http.Handler {
			mux := http.NewServeMux()
			mux.Handle("/api/lifecycle/", h)
			return mux
		}, "/api/lifecycle/tasks", `mount the handler with http.StripPrefix(\"/api/lifecycle\", svc.Handler())`},
		{"trailing slash stripped", func(h http.Handler) http.Handler {
			mux := http.NewServeMux()
			mux.Handle("/api/lifecycle/", http.StripPrefix("/api/lifecycle/", h))
			return mux
		}, "/api/lifecycle/tasks", `mount it with http.StripPrefix(\"/api/lifecycle\", ...), without the trailing slash`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", tt.path, nil)
			req.Header.Set("Authorization", "Bearer "+e.Admin)
			rec := httptest.NewRecorder()
			tt.mount(e.Svc.Handler()).ServeHTTP(rec, req)
			if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), tt.want) {
				t.Fatalf("GET %s = %d %s\nwant 404 saying %s", tt.path, rec.Code, rec.Body, tt.want)
			}
		})
	}
}

// TestErrorMessagesSayWhatIsWrong checks the wording of 401 and 404
// answers: the expected header form, and "not found".
func TestErrorMessagesSayWhatIsWrong(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		path, key, want string
	}{
		{"/tasks", "", `Missing API key; send the header \"Authorization: Bearer lsk_...\"`},
		{"/tasks", "nope", `Malformed API key; send the header \"Authorization: Bearer lsk_...\"`},
		{"/tasks", "lsk_0123456789abcdefghijklmnopqrstuvwxyz", `Unknown API key; send \"Authorization: Bearer lsk_...\"`},
		{"/tasks/tsk_nope", e.Admin, `Task \"tsk_nope\" not found.`},
		{"/ship-operations/shp_nope", e.Admin, `Ship operation \"shp_nope\" not found.`},
		{"/event-subscriptions/whs_nope", e.Admin, `Event subscription \"whs_nope\" not found.`},
	}
	for _, tt := range tests {
		rec := e.Do(apitest.Request{Method: "GET", Path: tt.path, Key: tt.key})
		if !strings.Contains(rec.Body.String(), tt.want) {
			t.Errorf("GET %s = %d %s\nwant a message with %s", tt.path, rec.Code, rec.Body, tt.want)
		}
	}
}

// TestServingWithoutStartWarns checks that a Service whose Start was not
// called says so in its log when it serves its first request, once.
func TestServingWithoutStartWarns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Do(apitest.Request{Method: "GET", Path: "/tasks", Key: e.Admin})
	e.Do(apitest.Request{Method: "GET", Path: "/tasks", Key: e.Admin})
	if n := strings.Count(e.LogText(), "Service.Start was not called"); n != 1 {
		t.Fatalf("the log warns %d times about Start, want once:\n%s", n, e.LogText())
	}

	started := newEnv(t)
	startService(t, started.Svc)
	started.Do(apitest.Request{Method: "GET", Path: "/tasks", Key: started.Admin})
	if strings.Contains(started.LogText(), "Service.Start was not called") {
		t.Fatalf("a started Service warns about Start:\n%s", started.LogText())
	}
}

// An unknown path of 30,000 segments (60 KB) is answered, without a key, in
// a few milliseconds (under 250 ms on a loaded machine), and a known route
// at its end is still named in the hint.
// Not parallel, and the best of three tries counts, so that a noisy machine
// under -race does not fail it; before httpapi.MountHint was bounded, the
// router ran once per segment over the rest of the path and this took
// seconds.
func TestLongUnknownPathsAreCheap(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("/x", 30000)
	// Linear work answers in a few milliseconds; the quadratic search this
	// guards against took seconds. The bound leaves room for a loaded
	// machine (the least of three tries counts).
	const cheap = 250 * time.Millisecond
	tests := []struct {
		name, path, want string
	}{
		{"no route at the end", long, "No such endpoint"},
		{"a route at the end", long + "/event-subscriptions/whs_1/deliveries/dlv_1/retry",
			`mount the handler with http.StripPrefix(\"` + long + `\", svc.Handler())`},
	}
	for _, tt := range tests {
		var rec *httptest.ResponseRecorder
		elapsed := time.Hour
		for try := 0; try < 3 && elapsed >= cheap; try++ {
			req := httptest.NewRequest("POST", "/api"+tt.path, nil)
			rec = httptest.NewRecorder()
			start := time.Now()
			e.Host.ServeHTTP(rec, req)
			elapsed = time.Since(start)
		}
		if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), tt.want) {
			t.Errorf("%s: %d %.300s\nwant 404 saying %.300s", tt.name, rec.Code, rec.Body, tt.want)
		}
		if elapsed >= cheap {
			t.Errorf("%s: answered in %s, want under %s", tt.name, elapsed, cheap)
		}
	}
}
