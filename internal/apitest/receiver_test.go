package apitest

import (
	"net/http"
	"strings"
	"testing"
)

// A held request is counted in flight and recorded only once released;
// the receiver then answers what SetRespond says.
func TestReceiverHoldsRecordsAndAnswers(t *testing.T) {
	rc := NewReceiver(t)
	rc.SetRespond(func(n int, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable + n - 1) })
	hold := make(chan struct{})
	rc.Hold(hold)
	answered := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", rc.URL("/hooks"), strings.NewReader(`{"id":"evt_1"}`))
		req.Header.Set("X-Service-Event-Id", "evt_1")
		resp, err := rc.Server().Client().Do(req)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	WaitFor(t, func() bool { now, _ := rc.InFlight(); return now == 1 })
	select {
	case d := <-rc.Got():
		t.Fatalf("a held request was recorded: %s", d.Body)
	default:
	}
	close(hold)
	d := rc.Next()
	if d.Path != "/hooks" || d.EventID() != "evt_1" || string(d.Body) != `{"id":"evt_1"}` {
		t.Errorf("recorded %q %q %s", d.Path, d.EventID(), d.Body)
	}
	if code := <-answered; code != http.StatusServiceUnavailable {
		t.Errorf("answered %d, want 503", code)
	}
	WaitFor(t, func() bool { now, most := rc.InFlight(); return now == 0 && most == 1 })
}
