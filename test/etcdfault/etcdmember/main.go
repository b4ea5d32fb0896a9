// Command etcdmember runs one member of an etcd cluster (the etcd server
// module Tollgate already depends on, started with embed.StartEtcd), so
// that a test can kill, stop and restart each member of a cluster as a
// process of its own. It is not shipped: the etcd-failure test builds it.
//
//	etcdmember --name m1 --dir DIR --client-url http://127.0.0.1:P1 \
//	  --peer-url http://127.0.0.1:Q1 \
//	  --initial-cluster m1=http://127.0.0.1:Q1,m2=...,m3=...
//
// A member restarted on its data directory rejoins with what it has
// there; --initial-cluster is then ignored, as etcd does. It prints
// "ready" once it has joined the cluster (which needs a quorum), and stops on SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "etcdmember:", err)
		os.Exit(1)
	}
}

func run() error {
	name := flag.String("name", "", "member name")
	dir := flag.String("dir", "", "data directory")
	clientURL := flag.String("client-url", "", "client URL to listen on and advertise")
	peerURL := flag.String("peer-url", "", "peer URL to listen on and advertise")
	cluster := flag.String("initial-cluster", "", "name=peer-url,... of every member")
	flag.Parse()
	if *name == "" || *dir == "" || *clientURL == "" || *peerURL == "" || *cluster == "" {
		return fmt.Errorf("--name, --dir, --client-url, --peer-url and --initial-cluster are required")
	}
	cu, err := url.Parse(*clientURL)
	if err != nil {
		return fmt.Errorf("--client-url: %w", err)
	}
	pu, err := url.Parse(*peerURL)
	if err != nil {
		return fmt.Errorf("--peer-url: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = *cluster
	cfg.InitialClusterToken = "etcdfault"
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// The data is thrown away with the test; a SIGKILL keeps what the
	// page cache holds anyway.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer e.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("ready")
	case err := <-e.Err():
		return fmt.Errorf("serve: %w", err)
	case <-sig:
		return nil
	}
	select {
	case err := <-e.Err():
		return fmt.Errorf("serve: %w", err)
	case <-sig:
		return nil
	}
}
