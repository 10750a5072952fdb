package bench

import (
	"os"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
	"github.com/oslayer/oslayer/extension/test/exttest"
)

// waitImage polls the OSC (every 10 ms, five minutes at most) until its
// reconcile Succeeded with an image other than prev, and returns it.
func waitImage(b *testing.B, e *exttest.Env, osc *extensionsv1alpha1.OperatingSystemConfig, prev string, x *extension) string {
	b.Helper()
	end := time.Now().Add(5 * time.Minute)
	for {
		o, err := e.Get(osc)
		if err != nil {
			b.Fatal(err)
		}
		if img := image(o); img != "" && img != prev && o.Status.LastOperation.State == gardencorev1beta1.LastOperationStateSucceeded &&
			o.Status.ObservedGeneration == o.Generation {
			return img
		}
		select {
		case <-x.exited:
			log, _ := os.ReadFile(x.log)
			b.Fatalf("the extension exited:\n%s", tail(log))
		default:
		}
		if time.Now().After(end) {
			log, _ := os.ReadFile(x.log)
			b.Fatalf("%s/%s not reconciled within 5 minutes: %+v\n%s", o.Namespace, o.Name, o.Status.LastError, tail(log))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func image(o *extensionsv1alpha1.OperatingSystemConfig) string {
	if o.Status.ProviderStatus == nil || o.Status.LastOperation == nil {
		return ""
	}
	st, err := configv1alpha1.DecodeStatus(o.Status.ProviderStatus.Raw)
	if err != nil {
		return ""
	}
	return st.Image
}

// touch changes the OSC's file as gardenlet would (spec and operation
// annotation).
func touch(b *testing.B, e *exttest.Env, osc *extensionsv1alpha1.OperatingSystemConfig, body string) {
	b.Helper()
	o, err := e.Get(osc)
	if err != nil {
		b.Fatal(err)
	}
	patch := client.MergeFrom(o.DeepCopy())
	o.Spec.Files[1].Content.Inline.Data = body + "\n"
	o.Annotations["gardener.cloud/operation"] = "reconcile"
	if err := e.Client.Patch(e.Ctx, o, patch); err != nil {
		b.Fatal(err)
	}
}

func tail(b []byte) []byte {
	if len(b) > 8<<10 {
		return b[len(b)-8<<10:]
	}
	return b
}

// waitAll lists the OSCs (one request every 100 ms, ten minutes at most)
// until every one of many reconciled Succeeded with an image.
func waitAll(b *testing.B, e *exttest.Env, many []*extensionsv1alpha1.OperatingSystemConfig, x *extension) {
	b.Helper()
	want := map[client.ObjectKey]bool{}
	for _, o := range many {
		want[client.ObjectKeyFromObject(o)] = true
	}
	end := time.Now().Add(10 * time.Minute)
	for {
		var list extensionsv1alpha1.OperatingSystemConfigList
		if err := e.Client.List(e.Ctx, &list); err != nil {
			b.Fatal(err)
		}
		done := 0
		for i := range list.Items {
			o := &list.Items[i]
			if want[client.ObjectKeyFromObject(o)] && image(o) != "" &&
				o.Status.LastOperation.State == gardencorev1beta1.LastOperationStateSucceeded {
				done++
			}
		}
		if done == len(many) {
			return
		}
		select {
		case <-x.exited:
			log, _ := os.ReadFile(x.log)
			b.Fatalf("the extension exited:\n%s", tail(log))
		default:
		}
		if time.Now().After(end) {
			log, _ := os.ReadFile(x.log)
			b.Fatalf("%d of %d OSCs reconciled within 10 minutes\n%s", done, len(many), tail(log))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
