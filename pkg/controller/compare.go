package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// AppliedAnnotation holds a hash of the apply configuration a child was
// last applied with. Comparing the desired fields with the cached object
// finds what others changed; it cannot see a field this manager set once
// and no longer sets (a TLS section, a node affinity, an env entry's
// owner), because the informers drop managedFields. A changed hash says the
// desired fields themselves changed, and the apply that follows removes
// what this manager no longer sets.
const AppliedAnnotation = "controller-manager.ndsl.cn/applied"

// Typed converts an apply configuration into the object it describes, with
// exactly the fields it sets.
func Typed[T any](applyConfiguration any) (*T, error) {
	data, err := json.Marshal(applyConfiguration)
	if err != nil {
		return nil, fmt.Errorf("encoding the apply configuration: %w", err)
	}
	obj := new(T)
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, fmt.Errorf("decoding the apply configuration into %T: %w", obj, err)
	}
	return obj, nil
}

// fields is an object, or an apply configuration, as JSON values.
func fields(obj any) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, json.Unmarshal(data, &out)
}

// AppliedHash is the value of AppliedAnnotation for desired, an apply
// configuration.
func AppliedHash(desired any) (string, error) {
	want, err := fields(desired)
	if err != nil {
		return "", err
	}
	return appliedHash(want), nil
}

// appliedHash is the value of AppliedAnnotation for desired fields.
func appliedHash(desired map[string]any) string {
	data, _ := json.Marshal(desired) // map keys are sorted: stable
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
}

// drift is where an object differs from the fields desired of it.
type drift struct {
	// any reports a difference anywhere.
	any bool
	// lists maps JSON pointers of lists that differ to their desired
	// value: the lists a replace can repair when apply cannot, because
	// another field manager holds entries of them.
	lists map[string]any
}

// What the comparison knows of the schema of the children. Lists and maps
// a controller sets are its own, compared whole, except:
var (
	// keyedLists hold entries of others too (injected sidecars and volumes,
	// other owners): desired entries are found by key, others ignored.
	keyedLists = map[string]string{
		"/metadata/ownerReferences":      "uid",
		"/spec/template/spec/containers": "name",
		"/spec/template/spec/volumes":    "name",
	}
	// atomicMaps are replaced whole by an apply: a key added is drift.
	atomicMaps = map[string]bool{
		"/spec/selector": true,
	}
)

// UpToDate reports whether live carries every field desired (an apply
// configuration) sets, with the same value. Maps may hold more keys
// (server defaults, others' labels), but for atomic ones; lists must match
// element by element, but for those others add entries to.
func UpToDate(desired, live any) (bool, error) {
	want, err := fields(desired)
	if err != nil {
		return false, err
	}
	have, err := fields(live)
	if err != nil {
		return false, err
	}
	return !diff(want, have).any, nil
}

// diff compares desired fields with an object's.
func diff(desired, live map[string]any) drift {
	d := drift{lists: map[string]any{}}
	d.walk(desired, live, "", "", nil)
	return d
}

// walk compares want with have at path; list and listValue are the
// innermost list around path that a replace may repair, and its desired
// value ("" when there is none).
func (d *drift) walk(want, have any, path, list string, listValue any) {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok || (atomicMaps[path] && len(h) != len(w)) {
			d.differs(list, listValue)
			return
		}
		for k, v := range w {
			if path == "" && (k == "apiVersion" || k == "kind") {
				continue // the informers' typed objects carry no type meta
			}
			hv, ok := h[k]
			if !ok {
				d.differs(list, listValue)
				continue
			}
			d.walk(v, hv, path+"/"+escapePointer(k), list, listValue)
		}
	case []any:
		h, ok := have.([]any)
		if !ok {
			d.differs(path, w)
			return
		}
		if key, keyed := keyedLists[path]; keyed {
			// Others' entries stay: nothing here is for a replace.
			for _, e := range w {
				i := indexByKey(h, key, e)
				if i < 0 {
					d.differs("", nil)
					continue
				}
				d.walk(e, h[i], path+"/"+strconv.Itoa(i), "", nil)
			}
			return
		}
		if len(h) != len(w) {
			d.differs(path, w)
			return
		}
		for i := range w {
			d.walk(w[i], h[i], path+"/"+strconv.Itoa(i), path, w)
		}
	default:
		if !reflect.DeepEqual(want, have) {
			d.differs(list, listValue)
		}
	}
}

// indexByKey finds the entry of list whose key field equals entry's.
func indexByKey(list []any, key string, entry any) int {
	e, ok := entry.(map[string]any)
	if !ok {
		return -1
	}
	return slices.IndexFunc(list, func(l any) bool {
		m, ok := l.(map[string]any)
		return ok && m[key] != nil && reflect.DeepEqual(m[key], e[key])
	})
}

func (d *drift) differs(list string, value any) {
	d.any = true
	if list != "" {
		d.lists[list] = value
	}
}

// patchOp is one operation of a JSON patch.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// replacePatch is a JSON patch replacing the lists of d with their desired
// values, then doing extra, if, and only if, the object still has
// resourceVersion. A list inside another one replaced is replaced with it.
func (d drift) replacePatch(resourceVersion string, extra ...patchOp) ([]byte, error) {
	paths := make([]string, 0, len(d.lists))
	for p := range d.lists {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	ops := []patchOp{{Op: "test", Path: "/metadata/resourceVersion", Value: resourceVersion}}
	for i, p := range paths {
		if i > 0 && strings.HasPrefix(p, ops[len(ops)-1].Path+"/") {
			continue
		}
		ops = append(ops, patchOp{Op: "replace", Path: p, Value: d.lists[p]})
	}
	return json.Marshal(append(ops, extra...))
}

// pointerEscaper is built once: building a Replacer costs far more than
// using it, and escapePointer runs for every field of every comparison.
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(key string) string {
	if !strings.ContainsAny(key, "~/") {
		return key
	}
	return pointerEscaper.Replace(key)
}
