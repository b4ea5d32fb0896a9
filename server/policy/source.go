package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"

	opabundle "github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/loader/filter"
)

// maxBundleBytes bounds what is read of one bundle: the size of a tarball,
// the total size of a directory's files, and any one file of a tarball once
// decompressed.
const maxBundleBytes = 64 << 20

// source is a bundle read into memory once, so that its digest and the
// files OPA compiles are the same bytes even if the bundle changes on disk
// while it is being loaded.
type source struct {
	// digest is sha256:<hex>; see tarballDigest and dirDigest.
	digest string
	loader func() opabundle.DirectoryLoader
}

// readSource reads the bundle at p: a directory, or an OPA bundle tarball
// (.tar.gz) given as a regular file.
func readSource(p string) (*source, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	switch {
	case fi.IsDir():
		return readDir(os.DirFS(p))
	case fi.Mode().IsRegular():
		return readTarball(p)
	default:
		return nil, fmt.Errorf("%s is neither a directory nor a regular file", p)
	}
}

// readTarball reads a .tar.gz bundle. Its digest is the SHA-256 of the
// archive bytes, as sha256sum prints it.
func readTarball(p string) (*source, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxBundleBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxBundleBytes {
		return nil, fmt.Errorf("bundle is larger than %d bytes", maxBundleBytes)
	}
	sum := sha256.Sum256(data)
	return &source{
		digest: "sha256:" + hex.EncodeToString(sum[:]),
		loader: func() opabundle.DirectoryLoader {
			return opabundle.NewTarballLoader(bytes.NewReader(data)).WithSizeLimitBytes(maxBundleBytes)
		},
	}, nil
}

// memFile is one file of a directory bundle.
type memFile struct {
	name string // slash-separated, relative to the bundle root
	data []byte
}

// readDir reads every regular file of a directory bundle (symbolic links
// are not followed, as OPA's own directory loader does). Its digest is the
// SHA-256 of the lines "<sha256 hex>  <path>\n" of its files sorted by path,
// which is what
//
//	find . -type f | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum | sha256sum
//
// prints when run in the directory.
func readDir(fsys fs.FS) (*source, error) {
	var files []memFile
	var total int64
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if total += info.Size(); total > maxBundleBytes {
			return fmt.Errorf("bundle is larger than %d bytes", maxBundleBytes)
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		files = append(files, memFile{name: name, data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("bundle directory holds no files")
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	return &source{
		digest: dirDigest(files),
		loader: func() opabundle.DirectoryLoader { return &memLoader{files: files} },
	}, nil
}

// dirDigest hashes the sorted files as described at readDir.
func dirDigest(files []memFile) string {
	h := sha256.New()
	for _, f := range files {
		sum := sha256.Sum256(f.data)
		fmt.Fprintf(h, "%s  %s\n", hex.EncodeToString(sum[:]), f.name)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// memLoader hands a directory snapshot to OPA's bundle reader. Paths are
// slash-rooted, as OPA's directory loader gives them.
type memLoader struct {
	files []memFile
	next  int
}

// NextFile implements opabundle.DirectoryLoader.
func (l *memLoader) NextFile() (*opabundle.Descriptor, error) {
	if l.next >= len(l.files) {
		return nil, io.EOF
	}
	f := l.files[l.next]
	l.next++
	p := path.Join("/", f.name)
	return opabundle.NewDescriptor(p, p, bytes.NewBuffer(f.data)), nil
}

// WithFilter implements opabundle.DirectoryLoader; every file is kept.
func (l *memLoader) WithFilter(filter.LoaderFilter) opabundle.DirectoryLoader { return l }

// WithPathFormat implements opabundle.DirectoryLoader; paths stay slash-rooted.
func (l *memLoader) WithPathFormat(opabundle.PathFormat) opabundle.DirectoryLoader { return l }

// WithSizeLimitBytes implements opabundle.DirectoryLoader; readDir already
// bounds the total size.
func (l *memLoader) WithSizeLimitBytes(int64) opabundle.DirectoryLoader { return l }

// WithFollowSymlinks implements opabundle.DirectoryLoader; links are never followed.
func (l *memLoader) WithFollowSymlinks(bool) opabundle.DirectoryLoader { return l }
