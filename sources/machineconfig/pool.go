package machineconfig

import (
	"encoding/json"
	"fmt"
	"strings"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"

	"github.com/oslayer/oslayer/internal/field"
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
//
// Its errors are bad input (model.InputError).
func LoadPool(paths []string, name string) (Options, error) {
	o, err := loadPool(paths, name)
	return o, model.MarkInput(err)
}

func loadPool(paths []string, name string) (Options, error) {
	var pools []foundPool
	for _, p := range paths {
		fp, err := readPools(p)
		if err != nil {
			return Options{}, err
		}
		pools = append(pools, fp...)
	}
	pick, err := pickPool(pools, name, paths)
	if err != nil {
		return Options{}, err
	}
	return Options{Pool: pick.pool.Name, MachineConfigPool: &pick.pool, PoolSource: pick.where, poolPath: pick.path, poolDigest: pick.digest}, nil
}

// foundPool is a MachineConfigPool read from a file: where it was (file,
// document, item) and the digest of its document.
type foundPool struct {
	pool   mcfgv1.MachineConfigPool
	where  string
	path   string
	digest string
}

// readPools reads the MachineConfigPools of file p: each document a pool
// or a list of them.
func readPools(p string) ([]foundPool, error) {
	data, err := inputfile.Read(p)
	if err != nil {
		return nil, fmt.Errorf("MachineConfigPool input: %w", err)
	}
	var pools []foundPool
	for i, d := range model.SplitDocuments(data) {
		where := p
		if i > 0 {
			where = fmt.Sprintf("%s (document %d)", p, i+1)
		}
		items, kind, err := poolItems(d, where)
		if err != nil {
			return nil, err
		}
		for j, it := range items {
			iw := where
			if len(items) > 1 || kind != PoolKind {
				iw = fmt.Sprintf("%s items[%d]", where, j)
			}
			mcp, err := decodePool(it, iw, kind)
			if err != nil {
				return nil, err
			}
			pools = append(pools, foundPool{mcp, iw, p, sha(it)})
		}
	}
	return pools, nil
}

// poolItems are the pools of document d: d itself, or a list's items;
// kind is d's kind.
func poolItems(d []byte, where string) ([][]byte, string, error) {
	tm, err := model.PeekType(d)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %v", where, err)
	}
	switch tm.Kind {
	case "List", "MachineConfigPoolList":
		items, err := listItems(d)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %s: %v", where, tm.Kind, err)
		}
		return items, tm.Kind, nil
	case PoolKind:
		return [][]byte{d}, tm.Kind, nil
	default:
		return nil, "", fmt.Errorf("%s: kind %q (apiVersion %q) is not a %s", where, tm.Kind, tm.APIVersion, PoolKind)
	}
}

// decodePool decodes one pool (at iw, in a document of kind docKind)
// and checks its kind, apiVersion and name.
func decodePool(it []byte, iw, docKind string) (mcfgv1.MachineConfigPool, error) {
	var mcp mcfgv1.MachineConfigPool
	if err := model.DecodeStrict(it, &mcp); err != nil {
		return mcp, fmt.Errorf("%s: %s: %v", iw, PoolKind, err)
	}
	if mcp.Kind != PoolKind && !(mcp.Kind == "" && docKind == "MachineConfigPoolList") {
		return mcp, fmt.Errorf("%s: kind %q is not a %s", iw, mcp.Kind, PoolKind)
	}
	if mcp.APIVersion != "" && mcp.APIVersion != APIVersion {
		return mcp, fmt.Errorf("%s: %s %s: apiVersion %q, want %s", iw, PoolKind, mcp.Name, mcp.APIVersion, APIVersion)
	}
	if mcp.Name == "" {
		return mcp, fmt.Errorf("%s: %s without metadata.name", iw, PoolKind)
	}
	return mcp, nil
}

// pickPool is the pool named name, or the only one when name is empty.
func pickPool(pools []foundPool, name string, paths []string) (*foundPool, error) {
	var names []string
	var pick *foundPool
	for i := range pools {
		names = append(names, pools[i].pool.Name)
		if name != "" && pools[i].pool.Name != name {
			continue
		}
		if pick == nil {
			pick = &pools[i]
			continue
		}
		if name == "" {
			return nil, field.Errorf("several MachineConfigPools given (%s): choose one with %v NAME", strings.Join(names, ", "), field.Name("pool"))
		}
		return nil, fmt.Errorf("MachineConfigPool %s is defined twice: %s and %s", name, pick.where, pools[i].where)
	}
	if pick != nil {
		return pick, nil
	}
	if len(pools) == 0 {
		return nil, fmt.Errorf("no MachineConfigPool in %s", strings.Join(paths, ", "))
	}
	return nil, fmt.Errorf("no MachineConfigPool named %q among %s", name, strings.Join(names, ", "))
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
