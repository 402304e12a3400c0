//! Merge-patch semantics through `update` (RFC 7386).

use crate::Harness;
use crate::support::{Ctx, obj};
use serde_json::{Value, json};

/// The RFC 7386 appendix A examples whose target and patch are objects, through `update`.
pub async fn rfc7386_appendix_examples(h: &dyn Harness) {
    let ctx = Ctx::new(h, "patch").await;
    let cases = [
        (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
        (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
        (json!({"a":"b"}), json!({"a":null}), json!({})),
        (
            json!({"a":"b","b":"c"}),
            json!({"a":null}),
            json!({"b":"c"}),
        ),
        (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
        (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
        (
            json!({"a":{"b":"c"}}),
            json!({"a":{"b":"d","c":null}}),
            json!({"a":{"b":"d"}}),
        ),
        (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
        (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
        (
            json!({}),
            json!({"a":{"bb":{"ccc":null}}}),
            json!({"a":{"bb":{}}}),
        ),
    ];
    for (i, (target, patch, expected)) in cases.into_iter().enumerate() {
        let key = ctx.key("c", &format!("case{i}"));
        ctx.store
            .create(&key, obj(target.clone()), "")
            .await
            .unwrap();
        let doc = ctx
            .store
            .update(&key, &obj(patch.clone()), "")
            .await
            .unwrap();
        assert_eq!(Value::from(doc.data), expected, "{target} + {patch}");
        let stored = ctx.store.get(&key).await.unwrap().unwrap();
        assert_eq!(
            Value::from(stored.data),
            expected,
            "stored {target} + {patch}"
        );
    }
}

/// Removing a key that is not there, and nested removals, leave the rest alone.
pub async fn patch_removals_and_nesting(h: &dyn Harness) {
    let ctx = Ctx::new(h, "patch").await;
    let key = ctx.key("c", "d");
    ctx.store
        .create(
            &key,
            obj(json!({"a": {"b": {"c": 1, "d": 2}}, "k": [1]})),
            "",
        )
        .await
        .unwrap();
    let doc = ctx
        .store
        .update(
            &key,
            &obj(json!({"nope": null, "a": {"b": {"c": null, "e": {"f": null}}}})),
            "",
        )
        .await
        .unwrap();
    assert_eq!(
        Value::from(doc.data),
        json!({"a": {"b": {"d": 2, "e": {}}}, "k": [1]})
    );
}
