-- The tables of pgstore before fork evidence (schema.sql then), and the
-- indexes of trees it built (indexes.go then): an existing schema to
-- upgrade (TestUpgradeBesideCommit).
-- The central plane's tables (pgstore). Idempotent: run on every open,
-- it takes no lock on tables that exist.
CREATE TABLE IF NOT EXISTS trees (
    id               bigserial PRIMARY KEY,
    tenant_id        text        NOT NULL,
    day              text        NOT NULL, -- YYYY-MM-DD
    appliance_id     text        NOT NULL,
    heads            integer     NOT NULL DEFAULT 0,
    retention_days   integer     NOT NULL,
    leaves_expire_at timestamptz NOT NULL,
    leaves_pruned    boolean     NOT NULL DEFAULT false,
    UNIQUE (tenant_id, day, appliance_id)
);
-- The secondary indexes of trees are in indexes.go: built with the table
-- when it is new, later CONCURRENTLY, so as not to block ingest.

CREATE TABLE IF NOT EXISTS heads (
    tree_id bigint  NOT NULL REFERENCES trees (id) ON DELETE CASCADE,
    n       integer NOT NULL, -- 0, 1, ... in commit order
    head    text    NOT NULL, -- the head's JSON, as received
    PRIMARY KEY (tree_id, n)
);

CREATE TABLE IF NOT EXISTS leaves (
    tree_id    bigint NOT NULL REFERENCES trees (id) ON DELETE CASCADE,
    leaf_index bigint NOT NULL,
    request_id text   NOT NULL,
    sequence   bigint NOT NULL,
    leaf_hash  bytea  NOT NULL,
    PRIMARY KEY (tree_id, leaf_index),
    CONSTRAINT leaves_request_unique UNIQUE (tree_id, request_id)
);

CREATE TABLE IF NOT EXISTS nodes (
    tree_id bigint   NOT NULL REFERENCES trees (id) ON DELETE CASCADE,
    level   smallint NOT NULL,
    idx     bigint   NOT NULL,
    hash    bytea    NOT NULL,
    PRIMARY KEY (tree_id, level, idx)
);

CREATE INDEX IF NOT EXISTS trees_by_day ON trees (day);
CREATE INDEX IF NOT EXISTS trees_by_appliance ON trees (tenant_id, day, appliance_id COLLATE "C");
CREATE INDEX IF NOT EXISTS trees_leaves_expiry ON trees (leaves_expire_at) WHERE NOT leaves_pruned;
