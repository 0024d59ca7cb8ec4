package lifecycle_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/store/memory"
)

// Config.Validate refuses what New refuses, with the same message, and
// takes unset fields at their defaults.
// uncountingStore is a Store without lifecycle.InProgressCounter.
type uncountingStore struct{ lifecycle.Store }

func TestConfigValidateAgreesWithNew(t *testing.T) {
	t.Parallel()
	store := memory.New()
	t.Cleanup(func() { store.Close() })
	valid := lifecycle.Config{Store: store, BaseURL: "https://tasks.example.com/api/"}
	tests := []struct {
		name   string
		mutate func(*lifecycle.Config)
		want   string // in the error; "" for none
	}{
		{"the defaults", func(*lifecycle.Config) {}, ""},
		{"no store", func(c *lifecycle.Config) { c.Store = nil }, "Config.Store is required"},
		{"a relative base URL", func(c *lifecycle.Config) { c.BaseURL = "/api" }, "Config.BaseURL"},
		{"a short ship lease", func(c *lifecycle.Config) { c.ShipLease = time.Second }, "Config.ShipLease"},
		{"a negative ship concurrency", func(c *lifecycle.Config) { c.ShipConcurrency = -1 }, "Config.ShipConcurrency"},
		{"a sub-second reconcile interval", func(c *lifecycle.Config) { c.ReconcileInterval = time.Millisecond }, "Config.ReconcileInterval"},
		{"a negative reconcile interval disables it", func(c *lifecycle.Config) { c.ReconcileInterval = -1 }, ""},
		{"a webhook lease under two polls", func(c *lifecycle.Config) { c.WebhookLease = time.Second }, "Config.WebhookLease"},
		{"a decoding budget under one body", func(c *lifecycle.Config) { c.MaxDecodingBytes = 1024 }, "Config.MaxDecodingBytes"},
		{"a negative auth interval", func(c *lifecycle.Config) { c.AuthFailureInterval = -time.Second }, "Config.AuthFailureInterval"},
		{"a stall watch of todo", func(c *lifecycle.Config) {
			c.StallAfter = map[lifecycle.Status]time.Duration{lifecycle.StatusTodo: time.Hour}
		}, "Config.StallAfter names status \"todo\""},
		{"a sub-second stall", func(c *lifecycle.Config) {
			c.StallAfter = map[lifecycle.Status]time.Duration{lifecycle.StatusInReview: time.Millisecond}
		}, "Config.StallAfter[in_review]"},
		{"stall watches of in progress and in review", func(c *lifecycle.Config) {
			c.StallAfter = map[lifecycle.Status]time.Duration{lifecycle.StatusInProgress: time.Hour, lifecycle.StatusInReview: time.Second}
		}, ""},
		{"an agent without an ID", func(c *lifecycle.Config) { c.Agents = []lifecycle.Agent{{Name: "x"}} }, "Config.Agents[0]"},
		{"caps of the agent's loop", func(c *lifecycle.Config) { c.MaxInProgressPerAgent, c.MaxReworkRounds = 3, 5 }, ""},
		{"a negative cap", func(c *lifecycle.Config) { c.MaxReworkRounds = -1 }, "Config.MaxInProgressPerAgent and MaxReworkRounds"},
		{"an agent cap with a Store that does not count", func(c *lifecycle.Config) {
			c.Store, c.MaxInProgressPerAgent = uncountingStore{store}, 1
		}, "lifecycle.InProgressCounter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := valid
			tt.mutate(&cfg)
			before := cfg
			err := cfg.Validate()
			if cfg.ShipLease != before.ShipLease || cfg.Clock != before.Clock || cfg.BaseURL != before.BaseURL {
				t.Errorf("Validate changed the Config it was given")
			}
			_, newErr := lifecycle.New(cfg)
			switch {
			case tt.want == "" && (err != nil || newErr != nil):
				t.Errorf("Validate = %v, New = %v; want both nil", err, newErr)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate = %v, want an error naming %s", err, tt.want)
			case tt.want != "" && (newErr == nil || newErr.Error() != err.Error()):
				t.Errorf("New = %v, want Validate's error %v", newErr, err)
			}
		})
	}
}
