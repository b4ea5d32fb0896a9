// Package certfile serves a TLS certificate from PEM files and picks up a
// renewed one without a restart.
package certfile

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
)

// Pair is a certificate and key read from two PEM files. Each TLS
// handshake checks the files' size and modification time (two stats, a
// few microseconds against the handshake's milliseconds) and reads them
// again when either changed. A renewed pair that cannot be used yet (a
// certificate written before its key) leaves the previous one served,
// and is tried again at the next handshake.
type Pair struct {
	certFile, keyFile string
	// OnError, when set, is told of a changed pair that could not be
	// loaded, once per change.
	OnError func(error)

	mu       sync.Mutex
	cert     *tls.Certificate
	loaded   stamp // of the files cert was read from
	reported stamp // of the files OnError was last told about
}

// stamp is what tells a file's content changed.
type stamp struct {
	certSize, keySize int64
	certMod, keyMod   int64 // nanoseconds since the epoch
}

// Load reads the pair; it fails when the files cannot be used.
func Load(certFile, keyFile string) (*Pair, error) {
	p := &Pair{certFile: certFile, keyFile: keyFile}
	st, err := p.stat()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	p.cert, p.loaded = &cert, st
	return p, nil
}

// Config returns a server TLS configuration serving the pair, at TLS 1.2
// or later.
func (p *Pair) Config() *tls.Config {
	return &tls.Config{GetCertificate: p.GetCertificate, MinVersion: tls.VersionTLS12}
}

// GetCertificate is tls.Config's: the pair as the files now hold it, or
// the last one that could be loaded.
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.stat()
	if err != nil || st == p.loaded {
		p.report(st, err)
		return p.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(p.certFile, p.keyFile)
	if err != nil {
		p.report(st, err)
		return p.cert, nil
	}
	p.cert, p.loaded = &cert, st
	return p.cert, nil
}

// report tells OnError of err, once per state of the files.
func (p *Pair) report(st stamp, err error) {
	if err == nil || p.OnError == nil || st == p.reported {
		return
	}
	p.reported = st
	p.OnError(fmt.Errorf("certificate %s, key %s: %w; serving the previous one", p.certFile, p.keyFile, err))
}

func (p *Pair) stat() (stamp, error) {
	c, err := os.Stat(p.certFile)
	if err != nil {
		return stamp{}, err
	}
	k, err := os.Stat(p.keyFile)
	if err != nil {
		return stamp{}, err
	}
	return stamp{certSize: c.Size(), keySize: k.Size(), certMod: c.ModTime().UnixNano(), keyMod: k.ModTime().UnixNano()}, nil
}
