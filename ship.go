package lifecycle

// ShipStatus is the state of a ship operation.
type ShipStatus string

// The ship operation statuses.
const (
	ShipQueued    ShipStatus = "queued"
	ShipRunning   ShipStatus = "running"
	ShipSucceeded ShipStatus = "succeeded"
	ShipFailed    ShipStatus = "failed"
)

// Environment is where a shipped task is deployed.
type Environment string

// The deployment environments.
const (
	EnvironmentStaging    Environment = "staging"
	EnvironmentProduction Environment = "production"
)
