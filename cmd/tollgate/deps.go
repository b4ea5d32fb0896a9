package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/appliance"
	"github.com/tollgate-dev/tollgate/audit/fleet"
	auditlog "github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/examples"
	"github.com/tollgate-dev/tollgate/server/policy"
)

// applianceFlags configure the policy and the audit log of an appliance.
type applianceFlags struct {
	policyPath      string
	policyKeyFile   string
	policyKeyID     string
	policyAlgorithm string
	policyScope     string
	policyNoMemo    bool
	headInterval    time.Duration
	retention       retention
	journalDir      string
	engines         engineFlags
}

// register adds the appliance flags. The bundle verification flags are
// OPA's (opa run and opa build: --verification-key, --verification-key-id,
// --signing-alg, --scope) with a policy- prefix, with the same defaults.
func (a *applianceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.policyPath, "policy", "", "policy bundle: a directory or an OPA bundle .tar.gz (dev default: the built-in examples/policy bundle)")
	fs.StringVar(&a.policyKeyFile, "policy-verification-key", "", "PEM public key (or HMAC secret file) that signed bundles must verify with; set, unsigned bundles are refused")
	fs.StringVar(&a.policyKeyID, "policy-verification-key-id", policy.DefaultKeyID, "name of --policy-verification-key, as opa run --verification-key-id")
	fs.StringVar(&a.policyAlgorithm, "policy-signing-alg", policy.DefaultSigningAlg, "signing algorithm of bundles")
	fs.StringVar(&a.policyScope, "policy-scope", "", "scope that bundle signatures must carry (empty: signatures must carry none)")
	fs.BoolVar(&a.policyNoMemo, "policy-no-memo", false, "evaluate the policy bundle for every decision, never reusing the output of an equal earlier one")
	a.headInterval = appliance.DefaultHeadInterval
	fs.Var(durationFlag{p: &a.headInterval}, "head-interval", "how often signed audit heads are published when a tree grew; a `duration` above 0")
	a.retention = retention(auditlog.DefaultRetention)
	fs.Var(&a.retention, "body-retention", "how long request and response bodies are kept, e.g. 90d or 2160h (1 day to 7 years)")
	fs.StringVar(&a.journalDir, "audit-journal-dir", "", "directory `DIR` of the audit journal, which every request waits on: "+
		"best on a fast disk of its own, measured first with 'tollgate audit check-disk --dir' (default DATA/audit/journal)")
	a.engines.register(fs)
}

// loadPolicy compiles the bundle at path (the built-in default written
// under dataDir when path is empty).
func (a *applianceFlags) loadPolicy(ctx context.Context, dataDir string, logger *slog.Logger) (*policy.Engine, string, error) {
	path := a.policyPath
	if path == "" {
		if dataDir == "" {
			return nil, "", flagsErr("--policy is required")
		}
		var err error
		if path, err = examples.WriteDefaultPolicy(filepath.Join(dataDir, "policy-default")); err != nil {
			return nil, "", err
		}
	}
	opts, err := a.loadOptions()
	if err != nil {
		return nil, "", err
	}
	opts.Logger = logger.With(slog.String("component", "policy"))
	e, err := policy.Load(ctx, path, opts)
	if err != nil {
		return nil, "", fmt.Errorf("policy bundle %s: %w", path, err)
	}
	return e, path, nil
}

// loadOptions are the bundle verification settings of the flags.
func (a *applianceFlags) loadOptions() (policy.LoadOptions, error) {
	opts := policy.LoadOptions{KeyID: a.policyKeyID, Algorithm: a.policyAlgorithm, Scope: a.policyScope, NoDecisionMemo: a.policyNoMemo}
	if a.policyKeyFile != "" {
		key, err := os.ReadFile(a.policyKeyFile)
		if err != nil {
			return policy.LoadOptions{}, fmt.Errorf("--policy-verification-key: %w", err)
		}
		opts.VerificationKey = string(key)
	}
	return opts, nil
}

// openAudit opens the audit log under dataDir/audit, its journal in
// --audit-journal-dir if set, signing heads as app.
func (a *applianceFlags) openAudit(dataDir string, app *fleet.Appliance, logger *slog.Logger) (*auditlog.Log, error) {
	if err := auditlog.CheckRetention(time.Duration(a.retention)); err != nil {
		return nil, fmt.Errorf("--body-retention: %w", err)
	}
	return auditlog.Open(filepath.Join(dataDir, "audit"), a.auditOptions(app, logger))
}

// auditOptions are the audit log's options of the flags.
func (a *applianceFlags) auditOptions(app *fleet.Appliance, logger *slog.Logger) auditlog.Options {
	return auditlog.Options{
		ApplianceID: app.ID,
		Retention:   time.Duration(a.retention),
		JournalDir:  a.journalDir,
		Signer:      app,
		Logger:      logger.With(slog.String("component", "audit")),
	}
}

// devApplianceID returns the appliance id of a dev data directory, minting
// and saving one on first start.
func devApplianceID(dataDir string) (string, error) {
	file := filepath.Join(dataDir, "appliance-id")
	b, err := os.ReadFile(file)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	id := "app_dev" + strings.ToLower(rand.Text()[:10])
	if err := os.WriteFile(file, []byte(id+"\n"), 0o600); err != nil {
		return "", err
	}
	return id, nil
}

// retention is the --body-retention flag: a duration that also accepts
// whole days, "90d", from a day to 7 years. 0 is refused rather than taken
// as the default (which is the flag's own): it would read as "keep no
// body", the opposite of the 90 days the log would apply.
type retention time.Duration

func (d retention) String() string {
	if time.Duration(d)%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(time.Duration(d)/(24*time.Hour)), 10) + "d"
	}
	return time.Duration(d).String()
}

func (d *retention) Set(s string) error {
	var v time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days < 0 || days > 100*365 {
			return fmt.Errorf("%q is not a whole number of days", s)
		}
		v = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if v, err = time.ParseDuration(s); err != nil {
			return err
		}
	}
	if v == 0 || auditlog.CheckRetention(v) != nil {
		return fmt.Errorf("%s is outside the allowed range: from %s to %s (1 day to 7 years)",
			s, retention(auditlog.MinRetention), retention(auditlog.MaxRetention))
	}
	*d = retention(v)
	return nil
}
