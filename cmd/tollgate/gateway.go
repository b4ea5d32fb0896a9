package main

import (
	"context"
	"errors"
	"flag"
	"io"

	"go.uber.org/zap"

	"github.com/tollgate-dev/tollgate/server/appliance"
)

// runGateway serves an appliance against an external etcd cluster. Keys are
// managed through KeysService; seeds are a development tool and refused.
func runGateway(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("tollgate gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var common commonFlags
	common.register(fs)
	seedPath := fs.String("seed", "", "refused: seeds are accepted by `tollgate dev` only")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *seedPath != "" {
		return errors.New("--seed is accepted by `tollgate dev` only; create keys through KeysService")
	}
	endpoints := common.endpoints()
	if len(endpoints) == 0 {
		return errors.New("--etcd-endpoints is required")
	}
	logger, err := newLogger(stderr, common.logLevel)
	if err != nil {
		return err
	}
	cli, err := dialEtcd(endpoints)
	if err != nil {
		return err
	}
	defer cli.Close()
	return appliance.Run(ctx, appliance.Config{
		GatewayAddr:  common.gatewayAddr,
		GRPCAddr:     common.grpcAddr,
		Etcd:         cli,
		MaxBodyBytes: common.maxBodyBytes,
		Logger:       logger,
	})
}

func zapNop() *zap.Logger { return zap.NewNop() }
