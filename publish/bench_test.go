package publish_test

import (
	"fmt"
	"testing"

	"github.com/oslayer/oslayer/internal/registry"
)

// BenchmarkPush measures a pool push onto a 51-layer base in another
// repository of the same registry (every base layer mounted, two new
// layers uploaded, tag moved), and the unchanged rebuild (nothing sent).
//
//	go test -run '^$' -bench Push -benchtime 20x ./registry/push/
func BenchmarkPush(b *testing.B) {
	_, px := startProxied(b)
	reg := &registry.Options{Retry: fastRetry}
	base := pushBase(b, reg, px.Host, mkLayers(b, "base", 51, 16<<10))

	// n numbers the pools over every run of new-image (the benchmark
	// function runs more than once), so each pushes a new image to a new
	// repository.
	n := 0
	b.Run("new-image", func(b *testing.B) {
		var mounted, uploaded int64
		px.Reset()
		for i := 0; i < b.N; i++ {
			n++
			img := mkImage(b, base, mkLayers(b, fmt.Sprintf("pool%d", n), 2, 32<<10)...)
			bt := built(b, img)
			bt.Base.Ref = px.Host + "/fcos/base:stable"
			p := newPublisher(b, px.Host+fmt.Sprintf("/pools/p%d:v1", n), reg)
			pub := writeCommit(b, p, bt)
			mounted, uploaded = pub.Mounted, pub.Uploaded
		}
		b.ReportMetric(float64(mounted), "B-mounted/op")
		b.ReportMetric(float64(uploaded), "B-uploaded/op")
		b.ReportMetric(float64(len(px.Requests()))/float64(b.N), "requests/op")
	})

	b.Run("unchanged", func(b *testing.B) {
		img := mkImage(b, base, mkLayers(b, "same", 2, 32<<10)...)
		bt := built(b, img)
		p := newPublisher(b, px.Host+"/pools/same:v1", reg)
		writeCommit(b, p, bt)
		b.ResetTimer()
		px.Reset()
		var uploaded int64
		for i := 0; i < b.N; i++ {
			pub, err := p.Write(ctx, bt)
			if err != nil {
				b.Fatal(err)
			}
			uploaded += pub.Uploaded
		}
		b.ReportMetric(float64(uploaded)/float64(b.N), "B-uploaded/op")
		b.ReportMetric(float64(len(px.Requests()))/float64(b.N), "requests/op")
	})
}
