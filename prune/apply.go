package prune

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/internal/registry"
)

// RefusedError is a registry that does not delete: nothing was deleted.
type RefusedError struct {
	Repo   string
	Status int
	Err    error
}

func (e *RefusedError) Error() string {
	why := "it does not delete manifests (distribution deletes only with storage.delete.enabled: true)"
	if e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden {
		why = "the credentials may not delete"
	}
	return fmt.Sprintf("registry refuses DELETE in %s (HTTP %d): %s; nothing was deleted: %v", e.Repo, e.Status, why, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// probeDigest is a digest no manifest has: deleting it asks the registry
// whether it deletes at all without deleting anything.
var probeDigest = func() string {
	h := sha256.Sum256([]byte("oslayer prune: probe whether this registry deletes manifests"))
	return "sha256:" + hex.EncodeToString(h[:])
}()

// probe checks that repo accepts DELETE: deleting a manifest that does not
// exist answers 404 (MANIFEST_UNKNOWN) where deletes work, and 405
// (UNSUPPORTED), 401 or 403 where they do not.
func probe(ctx context.Context, reg *registry.Options, repo name.Repository) error {
	err := remote.Delete(repo.Digest(probeDigest), reg.RemoteOptions(ctx)...)
	switch {
	case err == nil, registry.IsStatus(err, http.StatusNotFound, http.StatusAccepted):
		return nil
	case registry.IsStatus(err, http.StatusMethodNotAllowed, http.StatusUnauthorized, http.StatusForbidden, http.StatusBadRequest):
		return &RefusedError{Repo: repo.Name(), Status: statusOf(err), Err: err}
	}
	return fmt.Errorf("probe DELETE in %s: %w", repo, err)
}

// statusOf is a registry error's HTTP status.
func statusOf(err error) int {
	for _, c := range []int{400, 401, 403, 404, 405} {
		if registry.IsStatus(err, c) {
			return c
		}
	}
	return 0
}

// deleteRemote deletes im's manifest (404: already gone) and then its
// attached tags' manifests, and a referrers index's artifacts.
func deleteRemote(ctx context.Context, reg *registry.Options, repo name.Repository, im *Image) error {
	if !im.Gone {
		if err := deleteDigest(ctx, reg, repo, im.Digest.String()); err != nil {
			return err
		}
	}
	for _, a := range im.Attached {
		desc, err := remote.Get(repo.Tag(a.Tag), reg.RemoteOptions(ctx)...)
		if registry.IsStatus(err, http.StatusNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s:%s: %w", repo, a.Tag, err)
		}
		if a.Kind == "referrers" && desc.MediaType.IsIndex() {
			if err := deleteReferrers(ctx, reg, repo, desc); err != nil {
				return err
			}
		}
		if err := deleteDigest(ctx, reg, repo, desc.Digest.String()); err != nil {
			return err
		}
	}
	return nil
}

// deleteReferrers deletes the artifacts a referrers fallback index lists.
func deleteReferrers(ctx context.Context, reg *registry.Options, repo name.Repository, desc *remote.Descriptor) error {
	m, err := v1.ParseIndexManifest(bytesReader(desc.Manifest))
	if err != nil {
		return fmt.Errorf("read referrers index %s@%s: %w", repo, desc.Digest, err)
	}
	for _, r := range m.Manifests {
		if err := deleteDigest(ctx, reg, repo, r.Digest.String()); err != nil {
			return err
		}
	}
	return nil
}

// deleteDigest deletes one manifest; one already gone is not an error.
func deleteDigest(ctx context.Context, reg *registry.Options, repo name.Repository, d string) error {
	err := remote.Delete(repo.Digest(d), reg.RemoteOptions(ctx)...)
	if err == nil || registry.IsStatus(err, http.StatusNotFound) {
		return nil
	}
	return fmt.Errorf("delete %s@%s: %w", repo, d, err)
}
