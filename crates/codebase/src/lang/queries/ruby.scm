(method name: (_) @name) @definition.method
(singleton_method name: (_) @name) @definition.method
(class name: [(constant) @name (scope_resolution name: (_) @name)]) @definition.class
(module name: [(constant) @name (scope_resolution name: (_) @name)]) @definition.module
(assignment left: (constant) @name) @definition.constant
((call method: (identifier) @_import_fn) @import (#match? @_import_fn "^(require|require_relative|load)$"))
