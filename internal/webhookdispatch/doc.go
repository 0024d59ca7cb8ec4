// Package webhookdispatch delivers the Service's webhooks: a [Dispatcher]
// leases the active subscriptions from the Store, reads the events after
// each one's cursor from the event [broker.Broker] (and from the Store when
// it falls behind), POSTs them signed to the receivers with retries, and
// records every attempt with the cursor in one transaction.
//
// It is built from what it uses (see [Config]): the Store's reads and a
// transaction runner, the clock, the broker, the secret box, the target
// guard and the telemetry. The lifecycle Service builds it in New and runs
// it from Start; the Service's subscription operations call
// [Dispatcher.SubscriptionsChanged] and [Dispatcher.StopWorker].
package webhookdispatch
