-- A subscription the host program allowed to deliver to a private address
-- (lifecycle.Subscription.AllowPrivateTarget): 1 for such, 0 for the
-- others, which every subscription created before was.

ALTER TABLE webhook_subscriptions ADD COLUMN allow_private_target INTEGER NOT NULL DEFAULT 0;
