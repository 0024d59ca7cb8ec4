package lifecycle

import (
	"context"
	"fmt"

	"github.com/tasklifecycle/lifecycle/internal/telemetry"
)

// The Service's metrics and spans are made by internal/telemetry, from
// Config.MeterProvider and Config.TracerProvider; docs/operations.md
// lists them.

// shipQueueCount returns what reads lifecycle.ship.queue.depth from c at
// each collection, each reading bounded by readyTimeout.
func shipQueueCount(c ShipQueueCounter) func(ctx context.Context) (telemetry.ShipQueue, error) {
	return func(ctx context.Context) (telemetry.ShipQueue, error) {
		ctx, cancel := context.WithTimeout(ctx, readyTimeout)
		defer cancel()
		n, err := c.CountShipQueue(ctx)
		if err != nil {
			return telemetry.ShipQueue{}, fmt.Errorf("lifecycle: count the ship queue: %w", err)
		}
		return telemetry.ShipQueue{Queued: int64(n.Queued), Running: int64(n.Running)}, nil
	}
}
