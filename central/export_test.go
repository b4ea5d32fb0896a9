package central

// IngestPingMinTime is the shortest ping interval the ingest listener
// allows an appliance.
const IngestPingMinTime = ingestPingMinTime
