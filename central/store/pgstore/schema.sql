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
    -- the canonical leaf (RFC 8785 JSON: metadata and body hashes), NULL
    -- when the appliance sent the hash alone; added to an existing table
    -- by migrate (pgstore.go)
    leaf       bytea,
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

-- Fork evidence (docs/central.md, "Forks"): signed heads refused as
-- inconsistent with their tree, with the stored head each contradicts,
-- deleted with the tree (head retention). A tenant's forks are numbered
-- in the order recorded; a tree keeps each refused head once. The
-- indexes are the constraints' own, made with the table; forks_once
-- (tree_id first) serves Prune's delete of a tree's forks. No foreign
-- key to trees: creating one locks trees (SHARE ROW EXCLUSIVE) behind
-- the commits in flight, and every commit behind it, when this table is
-- added to an existing schema; Prune deletes a tree's forks in the
-- transaction that deletes the tree.
CREATE TABLE IF NOT EXISTS forks (
    tenant_id          text        NOT NULL,
    number             bigint      NOT NULL, -- 0, 1, ... per tenant, as recorded
    tree_id            bigint      NOT NULL, -- trees (id); no foreign key, see above
    appliance_id       text        NOT NULL,
    day                text        NOT NULL, -- YYYY-MM-DD
    digest             bytea       NOT NULL, -- SHA-256 of signed_head
    signed_head        text        NOT NULL, -- the refused head's JSON, as received
    event_count        bigint      NOT NULL, -- the refused head's
    merkle_root        text        NOT NULL,
    stored_head        text        NOT NULL, -- the stored head's JSON it contradicts
    stored_event_count bigint      NOT NULL, -- the stored head's
    stored_root        text        NOT NULL, -- the stored tree's root at event_count
    stored_root_from_nodes boolean NOT NULL,
    -- when stored_root_from_nodes: the RFC 6962 consistency proof from
    -- stored_root at event_count to stored_head, one hash an element
    consistency_proof  bytea[]     NOT NULL,
    received_at        timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, number),
    CONSTRAINT forks_once UNIQUE (tree_id, digest)
);

-- The next fork number of each tenant: kept when its forks are deleted,
-- so that no number is given twice.
CREATE TABLE IF NOT EXISTS fork_numbers (
    tenant_id text   PRIMARY KEY,
    next      bigint NOT NULL
);
