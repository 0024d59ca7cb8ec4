package memory

import (
	"reflect"
)

// clone returns a deep copy of v: every pointer, slice and map reachable
// through exported fields is copied, so that the copy shares no memory a
// caller could change with v. Unexported fields are copied as they are;
// in the types the Store keeps they are those of time.Time, whose
// Location is never changed.
//
// Values go through clone on their way into the Store and on their way
// out.
func clone[T any](v T) T {
	var out T
	deepCopy(reflect.ValueOf(&out).Elem(), reflect.ValueOf(&v).Elem())
	return out
}

// deepCopy sets dst, which is settable and of src's type, to a deep copy
// of src.
func deepCopy(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		deepCopy(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			deepCopy(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Array:
		for i := range src.Len() {
			deepCopy(dst.Index(i), src.Index(i))
		}
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		for k, v := range src.Seq2() {
			e := reflect.New(v.Type()).Elem()
			deepCopy(e, v)
			m.SetMapIndex(k, e)
		}
		dst.Set(m)
	case reflect.Struct:
		dst.Set(src) // the unexported fields, as they are
		for i := range src.NumField() {
			if dst.Field(i).CanSet() {
				deepCopy(dst.Field(i), src.Field(i))
			}
		}
	case reflect.Interface:
		if src.IsNil() {
			return
		}
		e := reflect.New(src.Elem().Type()).Elem()
		deepCopy(e, src.Elem())
		dst.Set(e)
	default:
		dst.Set(src)
	}
}

// nonNil returns s, or an empty slice when s is nil: the SQL Stores give
// back an empty list for a list stored nil, and so does this one.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
