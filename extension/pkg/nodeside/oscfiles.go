package nodeside

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"net/url"
	"path"

	"github.com/coreos/ignition/v2/config/v3_4/types"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
)

// ignitionFiles translates the provision OSC's files as Gardener's
// extension library writes them (FilesToDiskScript): the content
// (inline, plain or b64, or the secretRef's key), the permissions when
// set (else the default, 0644), an existing file replaced. imageRef and
// hostName files are refused: user data cannot pull an image, and it is
// the same for every machine of the pool.
func ignitionFiles(files []extensionsv1alpha1.File, secrets map[string]map[string][]byte) ([]types.File, error) {
	var out []types.File
	seen := map[string]int{}
	for i, f := range files {
		field := fmt.Sprintf("spec.files[%d]", i)
		if f.Path == "" || !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path {
			return nil, fmt.Errorf("%s.path: %q is not a clean absolute path", field, f.Path)
		}
		if j, ok := seen[f.Path]; ok {
			return nil, fmt.Errorf("%s.path: %s is also spec.files[%d]", field, f.Path, j)
		}
		seen[f.Path] = i
		if f.HostName != nil {
			return nil, fmt.Errorf("%s.hostName: a file for one host cannot be in the user data of a pool", field)
		}
		data, err := fileContent(field, f.Content, secrets)
		if err != nil {
			return nil, err
		}
		tf := types.File{Node: types.Node{Path: f.Path, Overwrite: new(true)}}
		tf.Contents = contents(data, f.Content.TransmitUnencoded != nil && *f.Content.TransmitUnencoded)
		if f.Permissions != nil {
			if *f.Permissions > 0o7777 {
				return nil, fmt.Errorf("%s.permissions: %#o is not a file mode", field, *f.Permissions)
			}
			tf.Mode = new(int(*f.Permissions))
		}
		out = append(out, tf)
	}
	return out, nil
}

// fileContent is the bytes of one file's content.
func fileContent(field string, c extensionsv1alpha1.FileContent, secrets map[string]map[string][]byte) ([]byte, error) {
	switch {
	case c.ImageRef != nil:
		return nil, fmt.Errorf("%s.content.imageRef: user data cannot pull a file out of an image (a reconcile OSC can)", field)
	case c.Inline != nil && c.SecretRef != nil:
		return nil, fmt.Errorf("%s.content: has both inline and secretRef", field)
	case c.Inline != nil:
		switch c.Inline.Encoding {
		case "":
			return []byte(c.Inline.Data), nil
		case "b64":
			b, err := base64.StdEncoding.DecodeString(c.Inline.Data)
			if err != nil {
				return nil, fmt.Errorf("%s.content.inline.data: not base64: %v", field, err)
			}
			return b, nil
		default:
			return nil, fmt.Errorf("%s.content.inline.encoding: %q (want \"\" or \"b64\")", field, c.Inline.Encoding)
		}
	case c.SecretRef != nil:
		data, ok := secrets[c.SecretRef.Name][c.SecretRef.DataKey]
		if !ok {
			return nil, fmt.Errorf("%s.content.secretRef: Secret %q has no key %q", field, c.SecretRef.Name, c.SecretRef.DataKey)
		}
		return data, nil
	}
	return nil, fmt.Errorf("%s.content: has none of inline, secretRef", field)
}

// contents is the Ignition source of data: a data URL, base64 of the
// gzip-compressed bytes when that is shorter (cloud providers limit the
// size of user data: 16 KiB on AWS). A transmitUnencoded file is
// percent-encoded instead: machine-controller-manager replaces the
// URL-encoded placeholders (<<BOOTSTRAP_TOKEN>>, <<MACHINE_NAME>>) in the
// user data, which it could not find in base64.
func contents(data []byte, unencoded bool) types.Resource {
	if unencoded {
		return types.Resource{Source: new("data:," + url.PathEscape(string(data)))}
	}
	var z bytes.Buffer
	w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	_, _ = w.Write(data)
	_ = w.Close()
	if z.Len() < len(data) {
		return types.Resource{Source: new("data:;base64," + base64.StdEncoding.EncodeToString(z.Bytes())), Compression: new("gzip")}
	}
	return types.Resource{Source: new("data:;base64," + base64.StdEncoding.EncodeToString(data))}
}
