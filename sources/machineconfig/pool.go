package machineconfig

import (
	"encoding/json"
	"fmt"
	"strings"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"

	"github.com/oslayer/oslayer/internal/inputfile"
	"github.com/oslayer/oslayer/sources/model"
)

// PoolKind is the document kind of a MachineConfigPool.
const PoolKind = "MachineConfigPool"

// LoadPool reads MachineConfigPool objects from files (YAML/JSON, several
// documents per file, List items) and returns the one named name, or the
// only one when name is empty. The returned Options carry the pool and the
// source document; they select MachineConfigs by the pool's
// spec.machineConfigSelector.
func LoadPool(paths []string, name string) (Options, error) {
	type found struct {
		pool   mcfgv1.MachineConfigPool
		where  string
		path   string
		digest string
	}
	var pools []found
	for _, p := range paths {
		data, err := inputfile.Read(p)
		if err != nil {
			return Options{}, fmt.Errorf("MachineConfigPool input: %w", err)
		}
		for i, d := range model.SplitDocuments(data) {
			where := p
			if i > 0 {
				where = fmt.Sprintf("%s (document %d)", p, i+1)
			}
			items := [][]byte{d}
			tm, err := model.PeekType(d)
			if err != nil {
				return Options{}, fmt.Errorf("%s: %v", where, err)
			}
			if tm.Kind == "List" || tm.Kind == "MachineConfigPoolList" {
				items, err = listItems(d)
				if err != nil {
					return Options{}, fmt.Errorf("%s: %s: %v", where, tm.Kind, err)
				}
			} else if tm.Kind != PoolKind {
				return Options{}, fmt.Errorf("%s: kind %q (apiVersion %q) is not a %s", where, tm.Kind, tm.APIVersion, PoolKind)
			}
			for j, it := range items {
				iw := where
				if len(items) > 1 || tm.Kind != PoolKind {
					iw = fmt.Sprintf("%s items[%d]", where, j)
				}
				var mcp mcfgv1.MachineConfigPool
				if err := model.DecodeStrict(it, &mcp); err != nil {
					return Options{}, fmt.Errorf("%s: %s: %v", iw, PoolKind, err)
				}
				if mcp.Kind != PoolKind && !(mcp.Kind == "" && tm.Kind == "MachineConfigPoolList") {
					return Options{}, fmt.Errorf("%s: kind %q is not a %s", iw, mcp.Kind, PoolKind)
				}
				if mcp.APIVersion != "" && mcp.APIVersion != APIVersion {
					return Options{}, fmt.Errorf("%s: %s %s: apiVersion %q, want %s", iw, PoolKind, mcp.Name, mcp.APIVersion, APIVersion)
				}
				if mcp.Name == "" {
					return Options{}, fmt.Errorf("%s: %s without metadata.name", iw, PoolKind)
				}
				pools = append(pools, found{mcp, iw, p, sha(it)})
			}
		}
	}
	var names []string
	var pick *found
	for i := range pools {
		names = append(names, pools[i].pool.Name)
		if name == "" || pools[i].pool.Name == name {
			if pick != nil {
				if name == "" {
					return Options{}, fmt.Errorf("several MachineConfigPools given (%s): choose one with --pool NAME", strings.Join(names, ", "))
				}
				return Options{}, fmt.Errorf("MachineConfigPool %s is defined twice: %s and %s", name, pick.where, pools[i].where)
			}
			pick = &pools[i]
		}
	}
	if pick == nil {
		if len(pools) == 0 {
			return Options{}, fmt.Errorf("no MachineConfigPool in %s", strings.Join(paths, ", "))
		}
		return Options{}, fmt.Errorf("no MachineConfigPool named %q among %s", name, strings.Join(names, ", "))
	}
	return Options{Pool: pick.pool.Name, MachineConfigPool: &pick.pool, PoolSource: pick.where, poolPath: pick.path, poolDigest: pick.digest}, nil
}

func listItems(d []byte) ([][]byte, error) {
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := model.DecodeLoose(d, &list); err != nil {
		return nil, err
	}
	out := make([][]byte, len(list.Items))
	for i, it := range list.Items {
		out[i] = it
	}
	return out, nil
}

// poolInput records the pool document among the inputs.
func (o Options) poolInput() model.Input {
	return model.Input{Path: o.poolPath, Kind: PoolKind, Name: o.MachineConfigPool.Name, SHA256: o.poolDigest}
}
