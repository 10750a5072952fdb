package pipeline_test

import (
	"strings"
	"testing"

	"github.com/oslayer/oslayer/pipeline"
	"github.com/oslayer/oslayer/pipeline/settings"
)

// The settings' requestJobs reaches the specification, and a value out
// of 1..256 is refused naming the field.
func TestRequestJobsSetting(t *testing.T) {
	var s pipeline.Spec
	if err := s.SetSettings(settings.Settings{RequestJobs: 8}); err != nil || s.RequestJobs != 8 {
		t.Fatalf("SetSettings: %v, RequestJobs %d, want 8", err, s.RequestJobs)
	}
	err := pipeline.CheckSettings(settings.Settings{RequestJobs: 300})
	if err == nil || !strings.Contains(err.Error(), "requestJobs: 300: want 1 to 256") {
		t.Errorf("requestJobs 300: %v", err)
	}
	if err := pipeline.CheckSettings(settings.Settings{RequestJobs: 256}); err != nil {
		t.Errorf("requestJobs 256: %v", err)
	}
}
