package assemble

import (
	"syscall"
	"time"
)

// ProcessCPU is the CPU time (user and system) this process and its
// waited-for children (buildah's RUN steps) have used so far. A phase's
// CPU is the difference across it: it includes whatever else the process
// does at the time (other builds of a controller or fleet run).
func ProcessCPU() time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return total
}

// TimePhase runs f and appends its wall and CPU time to *phases as name.
func TimePhase(phases *[]Phase, name string, f func() error) error {
	start, cpu := time.Now(), ProcessCPU()
	err := f()
	*phases = append(*phases, Phase{Name: name, Seconds: time.Since(start).Seconds(), CPUSeconds: (ProcessCPU() - cpu).Seconds()})
	return err
}
