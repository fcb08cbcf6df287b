// Validates the OpenAPI document named on the command line with @apidevtools/swagger-parser,
// which checks it against the OpenAPI 3.1 schema and resolves every $ref: an independent check
// of what huma generates from Quiver's Go types.
const SwaggerParser = require("@apidevtools/swagger-parser");
SwaggerParser.validate(process.argv[2])
  .then((api) => console.log(`OpenAPI document valid: ${api.info.title} ${api.openapi}, ${Object.keys(api.paths).length} paths`))
  .catch((err) => { console.error("OpenAPI document invalid:", err.message); process.exit(1); });
