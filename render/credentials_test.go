package render

import (
	"context"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/sources/machineconfig"
	"github.com/oslayer/oslayer/test/fixtures"
)

// TestCredentialsNotBaked renders the MCO's rendered worker config: its
// pull secret is not in the image but reported as runtime-delivered,
// unless allowSecrets names it (as on the node, as stored in the image,
// or by a pattern) or bakeSecrets is set.
func TestCredentialsNotBaked(t *testing.T) {
	const pullSecret = "/var/lib/kubelet/config.json"
	render := func(req Request) (baked, runtime bool) {
		t.Helper()
		req.MachineConfigs, req.Pool = []string{fixtures.Path(t, "mco", "aws", "rendered-worker.yaml")}, "worker"
		res, err := Render(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range res.Report.Baked {
			if b.Path == pullSecret || strings.HasSuffix(b.StoredAt, pullSecret) {
				baked = true
			}
		}
		for _, r := range res.Report.Runtime {
			if r.Item == pullSecret && r.Reason == machineconfig.ReasonCredential && r.SHA256 != "" {
				runtime = true
			}
		}
		return baked, runtime
	}
	if baked, runtime := render(Request{}); baked || !runtime {
		t.Errorf("default: baked %t, runtime-delivered %t", baked, runtime)
	}
	for _, req := range []Request{
		{AllowSecrets: []string{pullSecret}},
		{AllowSecrets: []string{"usr/lib/oslayer/var/var/lib/kubelet/config.json"}},
		{AllowSecrets: []string{"/var/lib/kubelet/*.json"}},
		{BakeSecrets: true},
	} {
		if baked, runtime := render(req); !baked || runtime {
			t.Errorf("%v %t: baked %t, runtime-delivered %t", req.AllowSecrets, req.BakeSecrets, baked, runtime)
		}
	}
	if baked, _ := render(Request{AllowSecrets: []string{"/etc/kubernetes/kubeconfig"}}); baked {
		t.Error("allowing another path baked the pull secret")
	}
}
