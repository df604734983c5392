def aip_openapi(aip): return {}
