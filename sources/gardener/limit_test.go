package gardener

import (
	"testing"

	"github.com/oslayer/oslayer/sources/model"
)

func TestDefaultLimit(t *testing.T) {
	if model.MaxContentSize != 64<<20 {
		t.Fatalf("documented limit changed: %d", model.MaxContentSize)
	}
	if got := (Options{}).maxContent(); got != model.MaxContentSize {
		t.Fatalf("default limit %d", got)
	}
	if got := (Options{MaxContentSize: 10}).maxContent(); got != 10 {
		t.Fatalf("limit option ignored: %d", got)
	}
}
