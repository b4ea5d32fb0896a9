package main

import (
	"flag"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/edge"
)

// commonFlags are the flags every serving command accepts.
type commonFlags struct {
	gatewayAddr   string
	grpcAddr      string
	etcdEndpoints string
	logLevel      string
	maxBodyBytes  int64
	bodyTimeout   time.Duration
	metricsAddr   string
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.gatewayAddr, "gateway-addr", "127.0.0.1:8080", "OpenAI-compatible HTTP listen address")
	fs.StringVar(&c.grpcAddr, "grpc-addr", "127.0.0.1:9090", "internal gRPC listen address")
	fs.StringVar(&c.etcdEndpoints, "etcd-endpoints", "", "comma-separated etcd client URLs (dev: empty runs an embedded etcd)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.Int64Var(&c.maxBodyBytes, "max-body-bytes", 8<<20, "largest accepted request body in bytes")
	fs.DurationVar(&c.bodyTimeout, "body-read-timeout", edge.DefaultBodyReadTimeout, "time a client has to send its request body, after its headers (408 past it)")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (empty: off)")
}

func (c *commonFlags) endpoints() []string {
	var out []string
	for _, e := range strings.Split(c.etcdEndpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
