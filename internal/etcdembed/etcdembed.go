// Package etcdembed runs a single-member etcd inside the process, for
// `tollgate dev` and small sites. Production fleets point --etcd-endpoints
// at an external cluster instead.
package etcdembed

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// startTimeout bounds starting etcd until it serves.
const startTimeout = 60 * time.Second

// pending counts starts given up on whose etcd has not been closed yet.
var pending sync.WaitGroup

type startResult struct {
	e   *embed.Etcd
	err error
}

// Server is a running embedded etcd.
type Server struct {
	etcd *embed.Etcd
}

// Start runs etcd with its data in dir, listening on loopback ports the
// kernel picks (nothing outside the process needs them), and waits until it
// serves. It returns when ctx is done even if etcd is stuck starting.
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
	// StartEtcd itself can block with no bound: its bbolt file waits
	// forever for a file lock another process holds. It runs aside so that
	// ctx and the timeout apply to it too; one given up on is closed
	// whenever it does return.
	started := make(chan startResult, 1)
	pending.Add(1)
	go func() {
		e, err := embed.StartEtcd(cfg)
		started <- startResult{e, err}
	}()
	abandon := func() {
		go func() {
			defer pending.Done()
			if r := <-started; r.err == nil {
				r.e.Close()
			}
		}()
	}
	timeout := time.NewTimer(startTimeout)
	defer timeout.Stop()
	var e *embed.Etcd
	select {
	case r := <-started:
		pending.Done()
		if r.err != nil {
			return nil, fmt.Errorf("etcdembed: start in %s: %w", dir, r.err)
		}
		e = r.e
	case <-ctx.Done():
		abandon()
		return nil, ctx.Err()
	case <-timeout.C:
		abandon()
		return nil, fmt.Errorf("etcdembed: not started after %s (is %s locked by another process?)", startTimeout, dir)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcdembed: %w", err)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	case <-timeout.C:
		e.Close()
		return nil, fmt.Errorf("etcdembed: not ready after %s", startTimeout)
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
