package bundle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/tollgate-dev/tollgate/audit/log"
	"github.com/tollgate-dev/tollgate/internal/ids"
)

// SocketName is the export socket's name in the audit directory
// (DATA/audit/export.sock): a running appliance holds audit.db's lock, so
// `tollgate audit export` asks it for the bundle there.
const SocketName = "export.sock"

// statusTrailer is the HTTP trailer that says the bundle was written
// whole: a body cut short by an error after the first byte lacks it.
const statusTrailer = "Tollgate-Bundle-Status"

// Handler serves GET /v1/bundle?tenant_id=T&day=D: the bundle of the
// tenant's day from src, with the trailer Tollgate-Bundle-Status: ok once
// it is written whole.
func Handler(src Source, now func() time.Time, logger *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/bundle", func(w http.ResponseWriter, r *http.Request) {
		tenant, day := r.URL.Query().Get("tenant_id"), r.URL.Query().Get("day")
		if err := ids.CheckTenant(tenant); err != nil {
			http.Error(w, "tenant_id: "+err.Error(), http.StatusBadRequest)
			return
		}
		if _, err := ids.ParseDay(day); err != nil {
			http.Error(w, "day: "+err.Error(), http.StatusBadRequest)
			return
		}
		// The head is read first so that a day without one is a clean 404.
		if _, err := src.Head(tenant, day); err != nil {
			code := http.StatusInternalServerError
			if errors.Is(err, log.ErrNotFound) {
				code = http.StatusNotFound
				err = fmt.Errorf("%w: %s/%s", ErrNoHead, tenant, day)
			}
			http.Error(w, err.Error(), code)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Trailer", statusTrailer)
		if err := Write(w, src, tenant, day, now()); err != nil {
			logger.Error("audit bundle export failed", "tenant_id", tenant, "day", day, "err", err)
			w.Header().Set(statusTrailer, "failed: "+err.Error())
			return
		}
		w.Header().Set(statusTrailer, "ok")
	})
	return mux
}

// Listen binds the export socket at path (mode 0600: who may read
// audit.db may export). A socket file left by a process that ended is
// replaced: the caller holds the data directory's lock.
func Listen(path string) (net.Listener, error) {
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("audit export socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("audit export socket: %w", err)
	}
	return ln, nil
}

// Serve serves Handler on ln until ctx ends, then removes the socket file.
func Serve(ctx context.Context, ln net.Listener, src Source, logger *slog.Logger) error {
	srv := &http.Server{Handler: Handler(src, time.Now, logger), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		_ = srv.Close()
	}()
	err := srv.Serve(ln)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Fetch asks the appliance serving the export socket at path for the
// bundle of tenant's day and copies it to w. It fails unless the appliance
// says the bundle was written whole.
func Fetch(ctx context.Context, path, tenant, day string, w io.Writer) error {
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
	q := url.Values{"tenant_id": {tenant}, "day": {day}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://appliance/v1/bundle?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("the appliance answered %s: %s", resp.Status, string(msg))
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("reading the bundle from the appliance: %w", err)
	}
	if st := resp.Trailer.Get(statusTrailer); st != "ok" {
		if st == "" {
			st = "cut short"
		}
		return fmt.Errorf("the appliance's export %s", st)
	}
	return nil
}
