package gitlab

import (
	"net/http"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/adapter/internal/hostbudget"
)

func TestRateState(t *testing.T) {
	t.Parallel()
	reset := time.Unix(1772366460, 0)
	tests := []struct {
		name   string
		header map[string]string
		want   hostbudget.State
		ok     bool
	}{
		{"a minute's window", map[string]string{"RateLimit-Limit": "2000", "RateLimit-Observed": "3", "RateLimit-Remaining": "1997", "RateLimit-Reset": "1772366460"},
			hostbudget.State{Limit: 2000, Remaining: 1997, Reset: reset}, true},
		// 7,200 an hour is reported as 120 a minute; what is left is of
		// the hour's 7,200.
		{"an hour's window", map[string]string{"RateLimit-Limit": "120", "RateLimit-Observed": "200", "RateLimit-Remaining": "7000", "RateLimit-Reset": "1772366460"},
			hostbudget.State{Limit: 7200, Remaining: 7000, Reset: reset}, true},
		{"spent", map[string]string{"RateLimit-Limit": "2000", "RateLimit-Observed": "2001", "RateLimit-Remaining": "0", "RateLimit-Reset": "1772366460"},
			hostbudget.State{Limit: 2000, Remaining: 0, Reset: reset}, true},
		{"without Observed", map[string]string{"RateLimit-Limit": "600", "RateLimit-Remaining": "594", "RateLimit-Reset": "1772366460"},
			hostbudget.State{Limit: 600, Remaining: 594, Reset: reset}, true},
		{"no headers", map[string]string{}, hostbudget.State{}, false},
		{"no reset", map[string]string{"RateLimit-Limit": "600", "RateLimit-Remaining": "594"}, hostbudget.State{}, false},
		{"garbage", map[string]string{"RateLimit-Limit": "many", "RateLimit-Remaining": "594", "RateLimit-Reset": "1772366460"}, hostbudget.State{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			got, ok := rateState(h)
			if ok != tt.ok || got.Limit != tt.want.Limit || got.Remaining != tt.want.Remaining || !got.Reset.Equal(tt.want.Reset) {
				t.Errorf("rateState = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
