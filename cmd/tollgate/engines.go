package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/appliance"
	"github.com/tollgate-dev/tollgate/central/tlsconf"
	"github.com/tollgate-dev/tollgate/server/inference"
	"github.com/tollgate-dev/tollgate/server/inference/vllm"
)

// engineFlags are the model servers an appliance serves besides its
// built-in models (docs/engines.md).
type engineFlags struct {
	chat, embed  serverList
	apiKeyFile   string
	caFile       string
	firstListFor time.Duration // how long start waits for each server's model list
}

func (e *engineFlags) register(fs *flag.FlagSet) {
	fs.Var(&e.chat, "vllm", "a vLLM server whose models serve chat completions, as `NAMESPACE=URL` (e.g. gpu=http://10.0.0.5:8000): "+
		"its models are served as NAMESPACE/<its model id>; repeatable")
	fs.Var(&e.embed, "vllm-embed", "a vLLM server whose models serve embeddings, as `NAMESPACE=URL`; repeatable")
	fs.StringVar(&e.caFile, "vllm-ca", "", "PEM file of the CA certificates that https:// vLLM servers' certificates must chain to (empty: the system's)")
	fs.StringVar(&e.apiKeyFile, "vllm-api-key-file", "", "file holding the API key the vLLM servers were started with (vllm serve --api-key); empty: none")
	e.firstListFor = 5 * time.Second
}

// engines builds an engine per server and reads each model list once, so
// that the gateway lists the models from its first request. A server that
// does not answer in time is logged, not fatal: its models appear once it
// does (the engine reads the list again every 30 s).
// The servers' metrics (shared by their engines) are returned to register
// with the appliance's registry; nil when there is no server.
func (e *engineFlags) engines(ctx context.Context, logger *slog.Logger) ([]inference.Engine, prometheus.Collector, error) {
	var key string
	if e.apiKeyFile != "" {
		b, err := os.ReadFile(e.apiKeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--vllm-api-key-file: %w", err)
		}
		if key = strings.TrimSpace(string(b)); key == "" {
			return nil, nil, errors.New("--vllm-api-key-file: the file is empty")
		}
	}
	if len(e.chat)+len(e.embed) == 0 {
		return nil, nil, nil
	}
	var roots *x509.CertPool
	if e.caFile != "" {
		pemBytes, err := os.ReadFile(e.caFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--vllm-ca: %w", err)
		}
		if roots, err = tlsconf.Pool(pemBytes); err != nil {
			return nil, nil, fmt.Errorf("--vllm-ca %s: %w", e.caFile, err)
		}
	}
	client := vllm.NewClient(roots)
	metrics := vllm.NewMetrics()
	var engs []*vllm.Engine
	var urls []string
	for _, list := range []struct {
		servers   serverList
		embedding bool
	}{{e.chat, false}, {e.embed, true}} {
		for _, s := range list.servers {
			eng, err := vllm.New(vllm.Config{
				Namespace: s.namespace, URL: s.url, Embedding: list.embedding, APIKey: key, Metrics: metrics, Client: client,
				Logger: logger.With(slog.String("component", "vllm")),
			})
			if err != nil {
				return nil, nil, err
			}
			engs, urls = append(engs, eng), append(urls, s.url)
		}
	}
	// The lists are read at once, so that several servers that do not
	// answer delay the start by one wait, not one each.
	lctx, cancel := context.WithTimeout(ctx, e.firstListFor)
	defer cancel()
	var wg sync.WaitGroup
	out := make([]inference.Engine, len(engs))
	for i, eng := range engs {
		out[i] = eng
		wg.Go(func() {
			if err := eng.Refresh(lctx); err != nil {
				logger.Warn("model server: no model list yet; its models are served once it answers",
					"namespace", eng.Namespace(), "url", urls[i], "err", err)
			}
		})
	}
	wg.Wait()
	return out, metrics, nil
}

// apply adds the model servers' engines to an appliance's configuration,
// and their metrics to its collectors.
func (e *engineFlags) apply(ctx context.Context, logger *slog.Logger, cfg *appliance.Config) error {
	engines, metrics, err := e.engines(ctx, logger)
	if err != nil {
		return err
	}
	cfg.Engines = engines
	if metrics != nil {
		cfg.Collectors = append(cfg.Collectors, metrics)
	}
	return nil
}

// serverList is a repeatable NAMESPACE=URL flag.
type serverList []server

type server struct{ namespace, url string }

func (l *serverList) String() string {
	var parts []string
	for _, s := range *l {
		parts = append(parts, s.namespace+"="+s.url)
	}
	return strings.Join(parts, ",")
}

func (l *serverList) Set(v string) error {
	ns, url, ok := strings.Cut(v, "=")
	if !ok || ns == "" || url == "" {
		return errors.New("must be NAMESPACE=URL, e.g. gpu=http://10.0.0.5:8000")
	}
	*l = append(*l, server{namespace: ns, url: url})
	return nil
}
