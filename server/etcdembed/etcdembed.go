// Package etcdembed runs a single-member etcd inside the process, for
// `tollgate dev` and small sites. Production fleets point --etcd-endpoints
// at an external cluster instead.
package etcdembed

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Server is a running embedded etcd.
type Server struct {
	etcd *embed.Etcd
}

// Start runs etcd with its data in dir, listening on loopback ports the
// kernel picks (nothing outside the process needs them), and waits until it
// serves.
func Start(ctx context.Context, dir string, logger *slog.Logger) (*Server, error) {
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.Name = "tollgate-dev"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	u, _ := url.Parse("http://127.0.0.1:0")
	cfg.ListenClientUrls = []url.URL{*u}
	cfg.AdvertiseClientUrls = []url.URL{*u}
	cfg.ListenPeerUrls = []url.URL{*u}
	cfg.AdvertisePeerUrls = []url.URL{*u}
	cfg.InitialCluster = cfg.Name + "=http://127.0.0.1:0"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdembed: start in %s: %w", dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcdembed: %w", err)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("etcdembed: not ready after 60s")
	}
	logger.Info("embedded etcd ready", slog.String("dir", dir), slog.Any("endpoints", endpoints(e)))
	return &Server{etcd: e}, nil
}

// Endpoints are the client URLs to dial.
func (s *Server) Endpoints() []string { return endpoints(s.etcd) }

// Err reports a fatal server error.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops the server.
func (s *Server) Close() { s.etcd.Close() }

func endpoints(e *embed.Etcd) []string {
	eps := make([]string, 0, len(e.Clients))
	for _, l := range e.Clients {
		eps = append(eps, "http://"+l.Addr().String())
	}
	return eps
}
