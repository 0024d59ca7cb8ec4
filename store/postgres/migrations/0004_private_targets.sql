-- A subscription the host program allowed to deliver to a private address
-- (lifecycle.Subscription.AllowPrivateTarget); every subscription created
-- before was not. As SQLite's migration 0009.

ALTER TABLE webhook_subscriptions ADD COLUMN allow_private_target BOOLEAN NOT NULL DEFAULT false;
