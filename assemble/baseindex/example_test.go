package baseindex_test

import (
	"context"
	"fmt"
	"io/fs"
	"log"
	"os"

	"github.com/oslayer/oslayer/assemble/baseindex"
	"github.com/oslayer/oslayer/test/synth"
)

// Index a base once, keep the index on disk, and read what rendering
// needs from its tree. The second resolution reads no layer.
func ExampleResolver() {
	img, err := synth.FCOSBase(0.00001)
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "baseindex-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	r := &baseindex.Resolver{Cache: &baseindex.Cache{Dir: dir}}
	for range 2 {
		res, err := r.Resolve(context.Background(), img)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("from", res.Source, "kernels", res.Index.Kernels)
	}
	res, _ := r.Resolve(context.Background(), img)
	unit, err := fs.ReadFile(res.Index.FS(), "usr/lib/systemd/system/chronyd.service")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d bytes of chronyd.service\n", len(unit))
	_, err = fs.ReadFile(res.Index.FS(), "usr/lib/modules/"+synth.KernelRelease+"/vmlinuz")
	fmt.Println(err)
	// Output:
	// from built kernels [6.18.13-200.fc43.x86_64]
	// from cache kernels [6.18.13-200.fc43.x86_64]
	// 117 bytes of chronyd.service
	// read usr/lib/modules/6.18.13-200.fc43.x86_64/vmlinuz: content not indexed
}
