// Command gitops-health says what Argo CD and kstatus make of Kubernetes objects.
//
// It reads a JSON list of objects (or a List with items) on stdin and prints one JSON
// line per object, in order:
//
//	{"apiVersion": ..., "kind": ..., "namespace": ..., "name": ...,
//	 "argo": {"status": ..., "message": ...}, "kstatus": {"status": ..., "message": ...}}
//
// "argo" comes from a Lua health script run in github.com/yuin/gopher-lua, the
// interpreter Argo CD embeds, set up as Argo CD sets it up for a health check: only the
// package, base and table libraries, the object as the global table obj, a one-second
// limit, and a returned table whose status must be one of Argo CD's health codes.
// (Argo CD also opens a subset of os, time and date, which no script here uses.)
// "kstatus" is status.Compute from sigs.k8s.io/cli-utils, the library behind Flux's
// health assessment and kubectl-style waits.
//
// Scripts, found for an object's group and kind in this order:
//
//	--argocd-cm FILE   an argocd-cm ConfigMap (YAML or JSON); its keys
//	                   resource.customizations.health.<group>_<Kind>, as Argo CD reads them
//	<Kind>.lua         a file (or a directory of files) named after one kind
//	<group>.lua        a file named after an API group, for every kind of that group
//
// An object no script covers, or a script that fails, is reported with Argo CD's answer
// for a failing check (Unknown and the error), and the command exits 1 after printing.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"
)

const configMapPrefix = "resource.customizations.health."

// Argo CD's health codes; any other status from a script reads as Unknown.
var healthCodes = map[string]bool{
	"Healthy": true, "Progressing": true, "Degraded": true,
	"Suspended": true, "Missing": true, "Unknown": true,
}

type verdict struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

type report struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Namespace  string  `json:"namespace,omitempty"`
	Name       string  `json:"name"`
	Argo       verdict `json:"argo"`
	Kstatus    verdict `json:"kstatus"`
}

func (r report) ref() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// scripts holds health scripts by argocd-cm key suffix (<group>_<Kind>), by lower-case
// kind and by API group.
type scripts struct {
	configMap map[string]string
	byKind    map[string]string
	byGroup   map[string]string
}

type configMapFlags []string

func (c *configMapFlags) String() string     { return strings.Join(*c, ",") }
func (c *configMapFlags) Set(v string) error { *c = append(*c, v); return nil }

func main() {
	var configMaps configMapFlags
	flag.Var(&configMaps, "argocd-cm", "an argocd-cm ConfigMap file (repeatable)")
	flag.Parse()
	found, err := load(configMaps, flag.Args())
	if err != nil {
		fail(err)
	}
	objects, err := readObjects(os.Stdin)
	if err != nil {
		fail(err)
	}
	out := bufio.NewWriter(os.Stdout)
	failed := false
	for _, obj := range objects {
		rep := report{
			APIVersion: obj.GetAPIVersion(),
			Kind:       obj.GetKind(),
			Namespace:  obj.GetNamespace(),
			Name:       obj.GetName(),
		}
		rep.Argo, err = argoHealth(found, obj)
		if err != nil {
			failed = true
			fmt.Fprintf(os.Stderr, "%s: %v\n", rep.ref(), err)
			rep.Argo = verdict{Status: "Unknown", Message: err.Error()}
		}
		rep.Kstatus, err = kstatus(obj)
		if err != nil {
			failed = true
			fmt.Fprintf(os.Stderr, "%s: kstatus: %v\n", rep.ref(), err)
		}
		line, err := json.Marshal(rep)
		if err != nil {
			fail(err)
		}
		out.Write(append(line, '\n'))
	}
	if err := out.Flush(); err != nil {
		fail(err)
	}
	if failed {
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gitops-health:", err)
	os.Exit(2)
}

func load(configMaps []string, paths []string) (*scripts, error) {
	s := &scripts{map[string]string{}, map[string]string{}, map[string]string{}}
	for _, path := range configMaps {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal(raw, &cm); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for key, script := range cm.Data {
			if suffix, ok := strings.CutPrefix(key, configMapPrefix); ok {
				s.configMap[suffix] = script
			}
		}
	}
	for _, path := range paths {
		files := []string{path}
		if info, err := os.Stat(path); err != nil {
			return nil, err
		} else if info.IsDir() {
			if files, err = filepath.Glob(filepath.Join(path, "*.lua")); err != nil {
				return nil, err
			}
		}
		for _, file := range files {
			raw, err := os.ReadFile(file)
			if err != nil {
				return nil, err
			}
			name := strings.TrimSuffix(filepath.Base(file), ".lua")
			if strings.Contains(name, ".") {
				s.byGroup[name] = string(raw)
			} else {
				s.byKind[strings.ToLower(name)] = string(raw)
			}
		}
	}
	if len(s.configMap)+len(s.byKind)+len(s.byGroup) == 0 {
		return nil, errors.New("no health scripts: pass --argocd-cm FILE or .lua files")
	}
	return s, nil
}

func (s *scripts) find(obj *unstructured.Unstructured) (string, error) {
	gvk := obj.GroupVersionKind()
	if script, ok := s.configMap[gvk.Group+"_"+gvk.Kind]; ok {
		return script, nil
	}
	if script, ok := s.byKind[strings.ToLower(gvk.Kind)]; ok {
		return script, nil
	}
	if script, ok := s.byGroup[gvk.Group]; ok {
		return script, nil
	}
	return "", fmt.Errorf("no health script for %s_%s", gvk.Group, gvk.Kind)
}

// readObjects decodes the objects as Kubernetes decodes unstructured JSON: whole
// numbers become int64, which kstatus requires for generations.
func readObjects(r io.Reader) ([]*unstructured.Unstructured, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err2 := json.Unmarshal(raw, &list); err2 != nil || list.Items == nil {
			return nil, fmt.Errorf("stdin: want a JSON list of objects or a List: %w", err)
		}
		items = list.Items
	}
	objects := make([]*unstructured.Unstructured, 0, len(items))
	for i, item := range items {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(item); err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
		objects = append(objects, obj)
	}
	return objects, nil
}

func kstatus(obj *unstructured.Unstructured) (verdict, error) {
	res, err := status.Compute(obj)
	if err != nil {
		return verdict{}, err
	}
	return verdict{Status: res.Status.String(), Message: res.Message}, nil
}

func argoHealth(s *scripts, obj *unstructured.Unstructured) (verdict, error) {
	script, err := s.find(obj)
	if err != nil {
		return verdict{}, err
	}
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), Protect: true}, lua.LString(lib.name))
		if err != nil {
			return verdict{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj.Object))
	if err := l.DoString(script); err != nil {
		return verdict{}, err
	}
	switch ret := l.Get(-1).(type) {
	case *lua.LTable:
		st, _ := ret.RawGetString("status").(lua.LString)
		msg := ret.RawGetString("message")
		out := verdict{Status: string(st)}
		if msg != lua.LNil {
			out.Message = msg.String()
		}
		if !healthCodes[out.Status] {
			return verdict{Status: "Unknown", Message: "Lua returned an invalid health status"}, nil
		}
		return out, nil
	case *lua.LNilType:
		return verdict{}, nil
	default:
		return verdict{}, fmt.Errorf("expect table output from Lua script, not %s", ret.Type())
	}
}

// toLua converts a decoded JSON value into Lua values: objects become tables with
// string keys, arrays tables indexed from 1, numbers Lua numbers.
func toLua(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case int64:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case json.Number:
		return lua.LString(v)
	case []any:
		table := l.CreateTable(len(v), 0)
		for _, item := range v {
			table.Append(toLua(l, item))
		}
		return table
	case map[string]any:
		table := l.CreateTable(0, len(v))
		for key, item := range v {
			table.RawSetString(key, toLua(l, item))
		}
		return table
	}
	return lua.LNil
}
