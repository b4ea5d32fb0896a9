package appliance

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	inferencev1 "github.com/tollgate-dev/tollgate/gen/tollgate/inference/v1"
	"github.com/tollgate-dev/tollgate/internal/netaddr"
	"github.com/tollgate-dev/tollgate/portal"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/keys"
)

// checkPortalAddr refuses a portal address that is not loopback when the
// portal has no TLS: its pages carry passwords, session cookies and key
// secrets.
func checkPortalAddr(addr string, withTLS bool) error {
	if withTLS {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("appliance: portal address %q: %w", addr, err)
	}
	if netaddr.IsLoopback(addr) {
		return nil
	}
	return fmt.Errorf("appliance: the portal serves %q without TLS: give it a certificate, or a loopback address behind a TLS proxy", addr)
}

// listenPortal binds the portal's address, over TLS when tlsCfg is set.
func listenPortal(listen func(what, addr string) (net.Listener, error), addr string, tlsCfg *tls.Config) (net.Listener, error) {
	if err := checkPortalAddr(addr, tlsCfg != nil); err != nil {
		return nil, err
	}
	l, err := listen("portal", addr)
	if err != nil || tlsCfg == nil {
		return l, err
	}
	return tls.NewListener(l, tlsCfg), nil
}

// newPortalServer is the operator portal's HTTP server: accounts and
// sessions in etcd, keys through store, the served models from svc.
func newPortalServer(cfg *Config, store *keys.Store, svc *inference.Service, reg prometheus.Registerer, log *slog.Logger) (*http.Server, error) {
	metrics := portal.NewMetrics()
	if err := reg.Register(metrics); err != nil {
		return nil, fmt.Errorf("appliance: portal metrics: %w", err)
	}
	p := portal.New(portal.Config{
		Admins:   portal.NewAdmins(cfg.Etcd, cfg.Now),
		Sessions: portal.NewSessions(cfg.Etcd, 0, 0, cfg.Now),
		Keys:     store,
		Models: func(ctx context.Context) ([]string, error) {
			resp, err := svc.ListModels(ctx, &inferencev1.ListModelsRequest{})
			if err != nil {
				return nil, err
			}
			ids := make([]string, 0, len(resp.GetModels()))
			for _, m := range resp.GetModels() {
				ids = append(ids, m.GetId())
			}
			return ids, nil
		},
		Secure:            cfg.PortalTLS != nil,
		PublicOrigin:      cfg.PortalPublicOrigin,
		RequireTwoStep:    cfg.PortalRequireTwoStep,
		SignInsPerAddress: cfg.PortalSignInsPerAddress,
		Now:               cfg.Now,
		Logger:            log,
		Metrics:           metrics,
	})
	return &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}, nil
}
