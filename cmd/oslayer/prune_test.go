package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/test/regtest"
)

// prunedRepo is a registry repository with a tagged pool image, one
// found only through its .sig tag and one a Node references. The CLI's
// tests delete nothing (a dry run, bad input): the in-memory registry.
// prune's own tests delete on docker-registry, whose deletes they depend
// on (a manifest's tags go with it; a registry that refuses deletes).
func prunedRepo(t *testing.T) (repo name.Repository, tagged, sigOnly, used v1.Hash, refs string) {
	t.Helper()
	r := regtest.Memory(t)
	repo, _ = name.NewRepository(r.Host + "/os/pools")
	push := func(labels map[string]string, ref name.Reference) v1.Hash {
		img, err := random.Image(64, 1)
		if err != nil {
			t.Fatal(err)
		}
		cf, _ := img.ConfigFile()
		cf = cf.DeepCopy()
		cf.Config.Labels = labels
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			t.Fatal(err)
		}
		h, _ := img.Digest()
		if ref == nil {
			ref = repo.Digest(h.String())
		}
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
		return h
	}
	pool := map[string]string{"io.oslayer.pool": "worker"}
	tagged = push(pool, repo.Tag("worker"))
	sigOnly, used = push(pool, nil), push(pool, nil)
	for _, h := range []v1.Hash{sigOnly, used} {
		push(nil, repo.Tag("sha256-"+h.Hex+".sig"))
	}
	refs = filepath.Join(t.TempDir(), "refs.yaml")
	doc := "kind: Node\nmetadata: {name: n1, annotations: {machineconfiguration.openshift.io/currentImage: '" + repo.Digest(used.String()).String() + "'}}\n"
	if err := os.WriteFile(refs, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return repo, tagged, sigOnly, used, refs
}

// The dry run deletes nothing and says why each image stays or goes, as
// a table and as JSON.
func TestPruneCLIDryRun(t *testing.T) {
	repo, tagged, sigOnly, used, refs := prunedRepo(t)
	out, err := runCLI(t, "prune", repo.Name(), "--references", refs, "--keep", "0", "--delete-undated")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"REPOSITORY", "DIGEST", "AGE", "POOL", "ACTION", "WHY", "sha256:" + tagged.Hex[:12], "tagged worker", "sha256:" + sigOnly.Hex[:12], "sha256:" + used.Hex[:12],
		"not in use; no build record dates it (the policy deletes undated images)", "in use: Node n1 metadata.annotations[machineconfiguration.openshift.io/currentImage]", "dry run: 2 kept, 1 to delete"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	stdout, _, err := runCLIIO(t, nil, "prune", repo.Name(), "--references", refs, "--keep", "0", "--delete-undated", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		DryRun bool `json:"dryRun"`
		Images []struct {
			Digest   string `json:"digest"`
			Action   string `json:"action"`
			Attached []struct{ Tag, Kind string }
		} `json:"images"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || !res.DryRun || len(res.Images) != 3 {
		t.Fatalf("JSON %v:\n%s", err, stdout)
	}
	for _, im := range res.Images {
		if im.Digest == sigOnly.String() && (im.Action != "delete" || len(im.Attached) != 1 || im.Attached[0].Kind != "signature") {
			t.Errorf("%+v", im)
		}
	}
	if s := manifestStatus(t, repo, sigOnly); s != http.StatusOK {
		t.Errorf("the dry run deleted %s: %d", sigOnly, s)
	}
}

// Bad arguments and bad references exit 2 and delete nothing.
func TestPruneCLIBadInput(t *testing.T) {
	repo, _, sigOnly, _, _ := prunedRepo(t)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("kind: Node\nmetadata: {name: n}\n---\nkind: MachineConfig\nmetadata: {name: m}\nspec: {osImageURL: 'UPPER/Case:@'}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{repo.Name(), "--references", bad, "--yes", "--keep", "0", "--delete-undated"}, "references " + bad + ": document 2 (MachineConfig m): spec.osImageURL: invalid image reference"},
		{[]string{repo.Name() + ":worker", "--no-references", "--yes"}, "argument " + repo.Name() + ":worker: give a repository"},
		{[]string{repo.Name(), "--yes"}, "give --kubeconfig and/or --references"},
		{[]string{repo.Name(), "--no-references", "--keep", "-1"}, "--keep -1"},
	} {
		out, err := runCLI(t, append([]string{"prune"}, c.args...)...)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("prune %v: %v (%s), want exit 2: %s", c.args, err, out, c.want)
		}
	}
	if s := manifestStatus(t, repo, sigOnly); s != http.StatusOK {
		t.Errorf("bad input deleted %s: %d", sigOnly, s)
	}
}

func manifestStatus(t *testing.T, repo name.Repository, h v1.Hash) int {
	t.Helper()
	_, err := remote.Head(repo.Digest(h.String()))
	if err == nil {
		return http.StatusOK
	}
	if strings.Contains(err.Error(), "404") {
		return http.StatusNotFound
	}
	t.Fatal(err)
	return 0
}
