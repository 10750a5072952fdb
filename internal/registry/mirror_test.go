package registry

import "testing"

// TestRewriteNormalized: mirrors match the normalized reference, as
// containerd (gardener-node-agent) and containers/image resolve it:
// implicit docker.io and library/, Docker Hub's aliases.
func TestRewriteNormalized(t *testing.T) {
	o := &Options{Mirrors: []Mirror{
		{From: "docker.io", To: "mirror.example.com:5000"},
		{From: "index.docker.io/bitnami", To: "bitnami.mirror.example.com"},
		{From: "quay.io", To: "quay.mirror.example.com"},
		{From: "quay.io/coreos/etcd", To: "etcd.mirror.example.com/etcd"},
	}}
	const dg = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	for in, want := range map[string]string{
		"nginx":                             "mirror.example.com:5000/library/nginx:latest",
		"nginx:1.27":                        "mirror.example.com:5000/library/nginx:1.27",
		"nginx@" + dg:                       "mirror.example.com:5000/library/nginx@" + dg,
		"nginx:1.27@" + dg:                  "mirror.example.com:5000/library/nginx:1.27@" + dg,
		"library/nginx:1":                   "mirror.example.com:5000/library/nginx:1",
		"docker.io/nginx:1":                 "mirror.example.com:5000/library/nginx:1",
		"docker.io/library/nginx:1":         "mirror.example.com:5000/library/nginx:1",
		"index.docker.io/library/nginx:1":   "mirror.example.com:5000/library/nginx:1",
		"registry-1.docker.io/grafana/x:2":  "mirror.example.com:5000/grafana/x:2",
		"bitnami/redis:7":                   "bitnami.mirror.example.com/redis:7",
		"quay.io/fedora/fedora-coreos:next": "quay.mirror.example.com/fedora/fedora-coreos:next",
		"quay.io/coreos/etcd:v3":            "etcd.mirror.example.com/etcd:v3",
		"quay.io/coreos/etcd-operator:v1":   "quay.mirror.example.com/coreos/etcd-operator:v1",
		"gcr.io/distroless/static:nonroot":  "gcr.io/distroless/static:nonroot",
		"localhost:5000/x/y:1":              "localhost:5000/x/y:1",
		"not a reference":                   "not a reference",
	} {
		if got := o.Rewrite(in); got != want {
			t.Errorf("Rewrite(%q) = %q, want %q", in, got, want)
		}
	}
	if _, err := o.ParseReference("nginx:1.27"); err != nil {
		t.Errorf("ParseReference: %v", err)
	}
}
