package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestConsoleIsServed: the demo serves the operator console at /console/,
// where the admin key signs in and the board shows the seeded tasks.
func TestConsoleIsServed(t *testing.T) {
	base := startDemo(t)
	get := func(path string, cookie *http.Cookie) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", base+path, nil)
		if cookie != nil {
			req.AddCookie(cookie)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if page := get("/console/", nil); page.StatusCode != 200 || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /console/ = %d %s", page.StatusCode, page.Header.Get("Content-Type"))
	}
	resp, err := http.Post(base+"/console/session", "application/json", strings.NewReader(`{"key":"`+testAdminKey+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if resp.StatusCode != 200 || len(cookies) != 1 {
		t.Fatalf("sign in = %d, cookies %v", resp.StatusCode, cookies)
	}
	board := get("/console/board", cookies[0])
	var out struct {
		Data []struct {
			Identifier string `json:"identifier"`
		} `json:"data"`
	}
	raw, _ := io.ReadAll(board.Body)
	if err := json.Unmarshal(raw, &out); err != nil || board.StatusCode != 200 || len(out.Data) == 0 {
		t.Fatalf("GET /console/board = %d %s", board.StatusCode, raw)
	}
	// The API stays where it was.
	if tasks := get("/tasks", nil); tasks.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /tasks without a key = %d, want 401", tasks.StatusCode)
	}
}
