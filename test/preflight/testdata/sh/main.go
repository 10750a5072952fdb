// Command sh is a tiny static stand-in for /bin/sh in synthetic base images,
// so that `buildah bud` can run RUN steps without a real shell in the base.
// It understands `sh -c SCRIPT` where SCRIPT is commands joined by "&&" or
// ";": mkdir -p DIR..., echo WORDS > FILE, touch FILE..., rm -f FILE..., true.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if len(os.Args) != 3 || os.Args[1] != "-c" {
		fmt.Fprintln(os.Stderr, "sh: usage: sh -c SCRIPT")
		os.Exit(2)
	}
	script := strings.ReplaceAll(os.Args[2], "&&", ";")
	for _, cmd := range strings.Split(script, ";") {
		if err := run(strings.TrimSpace(cmd)); err != nil {
			fmt.Fprintln(os.Stderr, "sh:", err)
			os.Exit(1)
		}
	}
}

func run(cmd string) error {
	f := strings.Fields(cmd)
	if len(f) == 0 {
		return nil
	}
	switch f[0] {
	case "true":
		return nil
	case "mkdir":
		for _, d := range f[1:] {
			if d == "-p" {
				continue
			}
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		return nil
	case "echo":
		words, file, ok := strings.Cut(strings.TrimPrefix(cmd, "echo"), ">")
		if !ok {
			fmt.Println(strings.TrimSpace(words))
			return nil
		}
		if err := os.MkdirAll(filepath.Dir(strings.TrimSpace(file)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(strings.TrimSpace(file), []byte(strings.TrimSpace(words)+"\n"), 0o644)
	case "touch":
		for _, p := range f[1:] {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				return err
			}
		}
		return nil
	case "rm":
		for _, p := range f[1:] {
			if p == "-f" || p == "-rf" {
				continue
			}
			if err := os.RemoveAll(p); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%s: command not supported", f[0])
}
