// Grafana's published dashboard schema (@grafana/schema, the Dashboard type
// Grafana 11 generates from its CUE schema), made to accept JSON:
// the schema's string enums (ThresholdsMode, MappingType, ...) accept
// their values as plain strings, as they are written in a dashboard file.
// Nothing else is loosened: unknown keys, missing required keys and wrong
// value types are errors.
//
// ibexporter/tests/dashboards.rs writes each dashboards/*.json as
//   export const dashboard: DashboardJson = <the file>;
// and runs tsc (node_modules/.bin/tsc, installed by `npm ci` from
// scripts/setup) on it.
import type { Dashboard } from '@grafana/schema';

export type AsJson<T> =
  T extends string ? `${T}` :
  T extends number | boolean | null | undefined ? T :
  T extends Array<infer U> ? Array<AsJson<U>> :
  T extends object ? { [K in keyof T]: AsJson<T[K]> } :
  T;

export type DashboardJson = AsJson<Dashboard>;
